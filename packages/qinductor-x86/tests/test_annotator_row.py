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
    """The shipped opt-in rows: matmul (torchao's annotation) and matmul_int8 (symmetric
    int8 operands), by qcore's ``Annotator.opt_in`` and nothing else; matmul first."""
    row = ANNOTATORS.get("x86", "matmul")
    opt_in = [a.name for a in ANNOTATORS.annotators("x86") if a.opt_in]
    assert row.opt_in and opt_in == ["matmul", "matmul_int8"]


class Product(nn.Module):
    """``a @ b^T``, then attention's second product: probabilities (a softmax, through
    dropout) times ``b``."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(a, b.transpose(-2, -1))
        return torch.matmul(nn.functional.dropout(scores.softmax(-1), 0.1, self.training), b)


def matmul_operand_codes(quantizer: X86InductorQuantizer) -> list[tuple[torch.dtype, int, int, int]]:
    """(dtype, zero point, qmin, qmax) of each quantize the converted Product holds."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    gen = torch.Generator().manual_seed(0)
    inputs = (torch.randn(2, 4, 8, generator=gen), torch.randn(2, 4, 8, generator=gen))
    prepared = prepare_pt2e(torch.export.export(Product(), inputs).module(), quantizer)
    prepared(*inputs)
    quantize = torch.ops.quantized_decomposed.quantize_per_tensor.default
    return [
        (n.args[5], n.args[2], n.args[3], n.args[4])
        for n in convert_pt2e(prepared).graph.nodes
        if n.target is quantize
    ]


def test_matmul_int8_quantizes_both_operands_as_symmetric_int8_and_matmul_keeps_torchaos() -> None:
    """matmul_int8: symmetric int8 operands (a, b, b's transpose), but probabilities on the
    left: uint8 with zero point 0; matmul: torchao's uint8 for every operand."""
    symmetric = (torch.int8, 0, -127, 127)
    by_name = X86InductorQuantizer().set_global(config()).enable("matmul_int8")
    *operands, probabilities = matmul_operand_codes(by_name)
    assert operands == [symmetric] * 3 and probabilities == (torch.uint8, 0, 0, 255)
    # each row enabled alone takes the matmul from the global pass
    torchaos = matmul_operand_codes(X86InductorQuantizer().set_global(config()).enable("matmul"))
    assert len(torchaos) == 4 and all(c[0] is torch.uint8 and c[2:] == (0, 255) for c in torchaos)
    # a target without VNNI: matmul_int8 quantizes nothing (its int8 matmuls would saturate)
    with qcore.host.targeting("avx2"):
        assert matmul_operand_codes(X86InductorQuantizer().set_global(config()).enable("matmul_int8")) == []
    # a scoped config runs every opt-in row of its operator: matmul, first, takes it
    scoped = X86InductorQuantizer().set_function_type_qconfig(torch.matmul, config()).enable("matmul_int8")
    assert matmul_operand_codes(scoped) == torchaos


def test_matmul_int8_under_a_dynamic_config_chooses_symmetric_qparams_at_run_time() -> None:
    """Dynamic matmul_int8: a, b and b's transpose take torch's symmetric int8 qparams at
    run time; the probabilities, uint8 ones."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    gen = torch.Generator().manual_seed(0)
    inputs = (torch.randn(2, 4, 8, generator=gen), torch.randn(2, 4, 8, generator=gen))
    quantizer = X86InductorQuantizer().set_global(get_default_x86_inductor_quantization_config(is_dynamic=True))
    quantizer.enable("matmul_int8")
    prepared = prepare_pt2e(torch.export.export(Product(), inputs).module(), quantizer)
    prepared(*inputs)
    qd = torch.ops.quantized_decomposed
    chosen = [
        (n.target, n.args[1:3], n.args[4])
        for n in convert_pt2e(prepared).graph.nodes
        if n.target in (qd.choose_qparams.tensor, qd.choose_qparams_symmetric.tensor)
    ]
    symmetric = (qd.choose_qparams_symmetric.tensor, (-127, 127), torch.int8)
    assert chosen == [symmetric] * 3 + [(qd.choose_qparams.tensor, (0, 255), torch.uint8)]
