"""The qnnpack plugin, installed like a third-party distribution, is torch's QNNPACK backend.

Three claims, each against torch's own code rather than this package's: the config equals
torch's ``get_qnnpack_backend_config()`` field by field; the default mapping is torch's
``get_default_qconfig_mapping("qnnpack")`` (and QAT twin); and quantizing through qcore
gives bit-identical outputs to torch's native QNNPACK flow, on QNNPACK's kernels. The
conformance kit then runs every pattern, with the declared ``stays_float`` and engine.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest
import torch
import torch.ao.nn.intrinsic.quantized as nniq
import torch.ao.nn.quantized as nnq
from torch import nn
from torch.ao.quantization import (
    QConfigMapping,
    get_default_qat_qconfig_mapping,
    get_default_qconfig_mapping,
)
from torch.ao.quantization.qconfig import qconfig_equals
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
from torch.fx import GraphModule

import qcore
import qcore.fx
import qcore.testing
from qcore.int8.engine import quantized_engine
from qcore.testing import compare_backend_configs
from qcore.testing.reference import torch_backend_config

#: torch 2.13's get_qnnpack_backend_config(), the reference for every claim below
TORCHS = torch_backend_config("qnnpack")
#: how many patterns torch 2.13's QNNPACK config declares
TORCH_PATTERNS = 190


def test_identical_to_torch_qnnpack_config() -> None:
    ours = qcore.get_backend_config("qnnpack")
    assert len(TORCHS.configs) == TORCH_PATTERNS  # the reference is the table we mean
    assert compare_backend_configs(ours, TORCHS) == []
    assert ours.name == "qnnpack"
    assert len(ours.configs) == TORCH_PATTERNS


def _entries(mapping: QConfigMapping) -> list[tuple[str, object, object]]:
    """(section, key, qconfig) for every entry of a mapping, in its order."""
    found: list[tuple[str, object, object]] = [("global", None, mapping.global_qconfig)]
    for section, table in (
        ("object_type", mapping.object_type_qconfigs),
        ("module_name", mapping.module_name_qconfigs),
        ("module_name_regex", mapping.module_name_regex_qconfigs),
    ):
        found += [(section, key, qconfig) for key, qconfig in table.items()]
    return found


@pytest.mark.parametrize(
    ("is_qat", "torchs"),
    [(False, get_default_qconfig_mapping), (True, get_default_qat_qconfig_mapping)],
    ids=["ptq", "qat"],
)
def test_default_mapping_is_torchs_qnnpack_mapping(
    is_qat: bool, torchs: Callable[[str], QConfigMapping]
) -> None:
    ours = _entries(qcore.get_qconfig_mapping("qnnpack", is_qat=is_qat, model=nn.Linear(2, 2)))
    expected = _entries(torchs("qnnpack"))
    assert [(s, k) for s, k, _ in ours] == [(s, k) for s, k, _ in expected]
    for (section, key, mine), (_, _, reference) in zip(ours, expected, strict=True):
        # qconfig_equals compares the observers' classes and arguments, not the objects
        assert qconfig_equals(mine, reference), f"{section} {key}: {mine} != {reference}"


class _Net(nn.Module):
    """conv + relu, a max pool, a conv whose output is added to its input, a linear."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.relu = nn.Conv2d(3, 8, 3, padding=1), nn.ReLU()
        self.pool = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.pool(self.relu(self.conv1(x)))
        y = y + self.conv2(y)
        return self.fc(torch.flatten(y, 1))


def _torch_flow(model: nn.Module, batches: list[torch.Tensor], engine: str) -> torch.Tensor:
    """torch's own FX flow, with torch's qnnpack mapping and config (neither qcore.fx nor
    this plugin): prepared, calibrated, converted and run under quantized engine
    ``engine``, restored afterwards; the output on batch 0."""
    with quantized_engine(engine), torch.no_grad():
        prepared = prepare_fx(
            copy.deepcopy(model),
            get_default_qconfig_mapping("qnnpack"),
            (batches[0],),
            backend_config=TORCHS,
        )
        for batch in batches:
            prepared(batch)
        out: torch.Tensor = convert_fx(prepared, backend_config=TORCHS)(batches[0])
    return out


def test_fx_flow_bit_identical_to_torch_native_qnnpack_flow() -> None:
    torch.manual_seed(0)
    model = _Net().eval()
    batches = [torch.randn(4, 3, 8, 8) for _ in range(3)]
    callers_engine = torch.backends.quantized.engine

    converted: GraphModule = qcore.fx.quantize(model, "qnnpack", batches)
    with torch.no_grad():
        ours = converted(batches[0])
    expected = _torch_flow(model, batches, "qnnpack")

    assert torch.equal(ours, expected)
    # QNNPACK kernels really ran: the patterns became quantized modules, the model is
    # bound to the qnnpack engine, and the caller's engine is left as it was
    kinds = {type(m) for m in converted.modules()}
    assert {nniq.ConvReLU2d, nnq.Conv2d, nnq.Linear} <= kinds
    assert getattr(converted, "quantized_engine", None) == "qnnpack"
    assert torch.backends.quantized.engine == callers_engine
    # and the engine matters here: torch's same flow on the x86 engine's kernels gives
    # other outputs, so the equality above could not hold had qcore packed for x86
    assert not torch.equal(_torch_flow(model, batches, "x86"), expected)


def test_passes_the_conformance_kit_on_every_pattern() -> None:
    """Every pattern prepared, converted and run; the declared ``stays_float`` exactly
    the ones torch's mapping leaves in float; the engine declared."""
    results = qcore.testing.assert_conformant("backend", "qnnpack")
    runs = [r for r in results if r.check == "prepare-convert"]
    assert len(runs) == TORCH_PATTERNS
    (engine,) = [r for r in results if r.check == "engine"]
    assert engine.ok
    assert "'qnnpack'" in engine.detail
