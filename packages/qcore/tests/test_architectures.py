"""The compact ImageNet replicas: seeded, FX-traceable, batch norms that folding changes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from qcore.zoo.architectures import architecture, architecture_cases

NAMES = [c.name for c in architecture_cases()]


def test_names_are_unique_and_looked_up() -> None:
    assert len(set(NAMES)) == len(NAMES) == 12
    assert architecture("resnet50").name == "resnet50"
    with pytest.raises(KeyError, match="known: resnet50"):
        architecture("alexnet")


@pytest.mark.parametrize("name", NAMES)
def test_builds_deterministically_and_traces(name: str) -> None:
    case = architecture(name)
    state = torch.random.get_rng_state()
    model, again = case.model(), case.model()
    assert torch.equal(torch.random.get_rng_state(), state)  # the caller's RNG is untouched
    for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    (x,) = case.inputs()
    assert x.shape == (4, 3, 64, 64)
    traced = torch.fx.symbolic_trace(model)
    with torch.no_grad():
        expected = model(x)
        assert expected.shape == (4, 100)
        assert torch.isfinite(expected).all() and expected.std() > 0
        torch.testing.assert_close(traced(x), expected)
        # the batch size is free: shapes fixed at construction leave it out
        torch.testing.assert_close(model(x[:1]), expected[:1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", NAMES)
def test_batch_norms_are_not_identities(name: str) -> None:
    norms = [m for m in architecture(name).model().modules() if isinstance(m, nn.BatchNorm2d)]
    for bn in norms:
        assert bn.running_mean is not None and bn.running_mean.abs().max() > 0
        assert not torch.equal(bn.weight.detach(), torch.ones_like(bn.weight))
    assert bool(norms) == (name not in {"squeezenet", "convnext", "swin", "vit"})
