"""Adding an x86 annotator is one ``X86Annotator`` in annotators.py's tuple: the operator
it quantizes, the module types and functions that call it, and whether it is opt-in. The
torchao-named setters, the global config and the int8 pass-through ops all follow.

The test adds a ``sigmoid`` row to the namespace as annotators.py would define it (the
same source, the tuple plus one row), and puts the shipped tuple back afterwards.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from torch import nn

import qcore
from qcore.pt2e.annotation.registry import ANNOTATORS
from qinductor_x86._version import __version__
from qinductor_x86.quantizer import annotators
from qinductor_x86.quantizer.operators import X86Annotator
from qinductor_x86.quantizer.x86_inductor_quantizer import (
    X86InductorQuantizer,
    get_default_x86_inductor_quantization_config,
)

SIGMOID = torch.ops.aten.sigmoid.default
SOURCE = f"qinductor-x86 {__version__}"


def sigmoid_row(*, opt_in: bool = False) -> X86Annotator:
    """The new row: the op, what calls it, opt-in or not."""
    return X86Annotator(
        "sigmoid",
        annotators.operands_annotator(SIGMOID),
        dynamic=True,
        ops=frozenset({SIGMOID}),
        opt_in=opt_in,
        description="sigmoid",
        called_as={SIGMOID: (nn.Sigmoid, torch.sigmoid)},
    )


@pytest.fixture
def define() -> Iterator[Any]:
    def with_row(row: X86Annotator) -> None:
        ANNOTATORS.define("x86", (*annotators.X86_ANNOTATORS, row), source=SOURCE)

    try:
        yield with_row
    finally:
        ANNOTATORS.define("x86", annotators.X86_ANNOTATORS, source=SOURCE)


@pytest.fixture(autouse=True)
def vnni_target() -> Iterator[None]:
    with qcore.host.targeting("avx512_vnni"):
        yield


class ConvFlattenSigmoid(nn.Module):
    """A quantized conv, a flatten (int8 only when a quantizable op reads it), a sigmoid."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.act = nn.Conv2d(3, 4, 3), nn.Sigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(torch.flatten(self.conv(x), 1))  # type: ignore[no-any-return]


def annotated(quantizer: X86InductorQuantizer) -> dict[str, bool]:
    """Which of the flatten and the sigmoid node the quantizer annotated."""
    gm = torch.export.export(ConvFlattenSigmoid().eval(), (torch.randn(1, 3, 6, 6),)).module()
    quantizer.annotate(quantizer.transform_for_annotation(gm))
    targets = {"flatten": torch.ops.aten.flatten.using_ints, "sigmoid": SIGMOID}
    return {
        name: any(
            n.target == target and "quantization_annotation" in n.meta for n in gm.graph.nodes
        )
        for name, target in targets.items()
    }


def config() -> Any:
    return get_default_x86_inductor_quantization_config()


def test_without_the_row_nothing_knows_sigmoid() -> None:
    assert annotated(X86InductorQuantizer().set_global(config())) == {"flatten": False, "sigmoid": False}
    with pytest.warns(UserWarning, match="cannot scope"):
        X86InductorQuantizer().set_function_type_qconfig(torch.sigmoid, config())


def test_a_row_is_annotated_and_named_by_its_callers(define: Any) -> None:
    define(sigmoid_row())
    # the global config quantizes it, and the flatten before it now feeds a quantizable op
    assert annotated(X86InductorQuantizer().set_global(config())) == {"flatten": True, "sigmoid": True}
    # its module type scopes it: None keeps it in float
    kept = X86InductorQuantizer().set_global(config()).set_module_type_qconfig(nn.Sigmoid, None)
    assert annotated(kept)["sigmoid"] is False


def test_an_opt_in_row_is_annotated_only_where_asked(define: Any) -> None:
    define(sigmoid_row(opt_in=True))
    assert annotated(X86InductorQuantizer().set_global(config()))["sigmoid"] is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the function is known now: no "cannot scope"
        by_function = X86InductorQuantizer().set_function_type_qconfig(torch.sigmoid, config())
    assert annotated(by_function)["sigmoid"] is True
    enabled = X86InductorQuantizer().set_global(config()).enable("sigmoid")
    assert annotated(enabled)["sigmoid"] is True


def test_matmul_is_opt_in_through_qcores_flag() -> None:
    """The shipped opt-in row: matmul, by qcore's ``Annotator.opt_in`` and nothing else."""
    row = ANNOTATORS.get("x86", "matmul")
    assert row.opt_in and [a.name for a in ANNOTATORS.annotators("x86") if a.opt_in] == ["matmul"]
