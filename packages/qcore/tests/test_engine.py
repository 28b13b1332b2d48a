"""qcore.int8.engine.quantized_engine (also qcore.testing.quantized_engine): switches, restores on failure, names a missing engine."""

from __future__ import annotations

import pytest
import torch

from qcore.int8.engine import quantized_engine


def test_switches_and_restores_even_when_the_block_fails() -> None:
    before = torch.backends.quantized.engine
    other = next(e for e in torch.backends.quantized.supported_engines if e not in (before, "none"))
    with pytest.raises(ZeroDivisionError), quantized_engine(other):
        assert torch.backends.quantized.engine == other
        _ = 1 / 0
    assert torch.backends.quantized.engine == before


def test_none_leaves_the_engine_alone() -> None:
    before = torch.backends.quantized.engine
    with quantized_engine(None):
        assert torch.backends.quantized.engine == before


def test_an_engine_this_build_lacks_is_named() -> None:
    before = torch.backends.quantized.engine
    with (
        pytest.raises(RuntimeError, match=r"'mychip-npu' is not in this torch build"),
        quantized_engine("mychip-npu"),
    ):
        pass
    assert torch.backends.quantized.engine == before
