"""The files the shipping tests ship, built once per session (``conftest.py``) and each
saved with its golden pair (``NAME.golden.pt``: the held-out input and the output of the
converted model the file was made from), for the deployed side (``deployed.py``) to run.

* x86: two AOTInductor packages, one per route, built under ``qcore.get_lowering("x86")``
  (AOTInductor builds C++, so they are few and each holds several models):
  ``gpt2_bert.pt2``, GPT-2 and BERT of the Hugging Face zoo by the x86 quantizer on the
  VNNI route; ``functional_convs_x86.pt2``, the functional convolutions by the XNNPACK
  quantizer on the AVX2 route, every conv on a doubled reduction.
* phones: ExecuTorch ``.pte`` files with the XNNPACK delegate: one for every zoo model
  (``zoo.pte``, the models side by side), one for the functional convolutions, each with the delegation report of its lowering; ExecuTorch's
  own quantizer on the functional convolutions, lowered but not written (it cannot be);
  the mixed-layer model (``qcore.zoo.models.MixedLayers``) by the quantizer derived
  from the ``executorch`` FX backend.

The zoo models are cut to their first layer (:func:`qcore.zoo.huggingface.first_layer`): the second repeats the
first's ops, so it adds nothing to compile, delegate or compare, but doubles the time
AOTInductor's C++ build and ExecuTorch's lowering take on each model.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import functional
import torch
from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
    XNNPACKQuantizer,
    get_symmetric_quantization_config,
)
from executorch.exir import to_edge_transform_and_lower
from shipped import output_qparams, with_int32_bias
from torch import nn
from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

import qcore
from qcore.pt2e.annotation.transforms import conv3d_as_conv2d
from qcore.zoo import huggingface as transformers_zoo
from qcore.zoo.models import mixed_layer_cases
from qquantizer_xnnpack.delegation import DelegationReport, watch

#: The guide, run as written by the session's ``guide`` fixture, and the files it writes
#: that the deployed side runs with torch alone (and ExecuTorch's runtime).
GUIDE = Path(__file__).parents[1] / "docs" / "shipping.md"
GUIDE_TORCH_ONLY = ("cnn_x86.pt2", "cnn_xnnpack.pte", "volume_executorch.pte")
DELEGATE_CALL = "executorch_call_delegate"
LINEAR = "aten.linear.default"
DOUBLED = "reduction doubled"


def _tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _golden(path: Path, inputs: tuple[torch.Tensor, ...], eager: list[torch.Tensor]) -> None:
    torch.save({"input": inputs, "output": eager}, path.with_suffix(".golden.pt"))


# x86: AOTInductor packages ----------------------------------------------------------------


@dataclass
class Package:
    """An AOTInductor package; what its converted model and its float model compute on the
    golden input; the int8 kernels the converted program asks for; the ops the lowering
    put on a doubled reduction; the output codes' qparams (None: float outputs)."""

    file: Path
    eager: list[torch.Tensor]
    reference: list[torch.Tensor]
    quantized_ops: int
    doubled: int
    qparams: list[tuple[float, int]] | None


ZOO_X86 = ("gpt2", "bert")


class _GptAndBert(nn.Module):
    """GPT-2 and BERT on the same token ids and attention mask: one program, one compile."""

    def __init__(self) -> None:
        super().__init__()
        self.models = nn.ModuleList(
            transformers_zoo.first_layer(transformers_zoo.build(name)[0]) for name in ZOO_X86
        )

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(model(ids, mask) for model in self.models)


def _tokens(seed: int) -> tuple[torch.Tensor, ...]:
    _, inputs = transformers_zoo.MODELS[ZOO_X86[0]]  # both take the zoo's ids and padded mask
    return inputs(seed)


def _aoti(
    program: torch.fx.GraphModule, inputs: tuple[torch.Tensor, ...], path: Path, route: str
) -> int:
    """``program`` compiled ahead of time under the x86 lowering, for ``route``'s CPUs, with
    freezing (and no FX graph cache: the lowering must run); the ops it doubled."""
    torch._dynamo.reset()
    with qcore.host.targeting(route), torch.no_grad(), qcore.get_lowering("x86") as lowering:
        torch._inductor.aoti_compile_and_package(
            torch.export.export(program, inputs),
            package_path=str(path),
            inductor_configs={"freezing": True, "fx_graph_cache": False},
        )
    torch._dynamo.reset()
    return sum(n for kind, n in lowering.report().lowered.items() if DOUBLED in kind)


def zoo_package(folder: Path) -> Package:
    """GPT-2 and BERT, VNNI route (``qcore.host.targeting("avx512_vnni")``: full-range
    weights, no op doubled), with 7-bit activations (``reduce_range=True``), which no
    CPU's 16-bit pair sums can overflow: exact on any CPU's kernels."""
    model, held_out = _GptAndBert().eval(), _tokens(transformers_zoo.HELD_OUT)
    with qcore.host.targeting("avx512_vnni"):
        quantizer = qcore.get_quantizer("x86", reduce_range=True)
        prepared = prepare_pt2e(qcore.export(model, _tokens(0)), quantizer)
        with torch.no_grad():
            for seed in range(1, 5):
                prepared(*_tokens(seed))
        converted = convert_pt2e(prepared)
    path = folder / "gpt2_bert.pt2"
    doubled = _aoti(converted, held_out, path, "avx512_vnni")
    with torch.no_grad():
        eager, reference = list(converted(*held_out)), list(model(*held_out))
    _golden(path, held_out, eager)
    linears = sum(
        1
        for n in converted.graph.nodes
        if str(n.target) == LINEAR and "dequantize" in str(getattr(n.args[1], "target", ""))
    )
    return Package(path, eager, reference, linears, doubled, None)


def functional_package(folder: Path, converted: torch.fx.GraphModule) -> Package:
    """The functional convolutions as the XNNPACK quantizer converted them, compiled for
    the AVX2 route (``qcore.host.targeting("avx2")``): each int8 conv whose int16 pair
    sums could overflow runs on a doubled reduction. (The x86 quantizer, like torchao's,
    matches ``nn.Conv*`` modules and leaves ``F.conv*`` in float.)"""
    held_out = functional.inputs(functional.HELD_OUT)
    path = folder / "functional_convs_x86.pt2"
    doubled = _aoti(converted, held_out, path, "avx2")
    with torch.no_grad():
        eager = list(converted(*held_out))
    _golden(path, held_out, eager)
    convs = sum(
        1
        for n in converted.graph.nodes
        if "conv" in str(n.target) and "transpose" not in str(n.target)
    )
    return Package(path, eager, functional.reference(), convs, doubled, output_qparams(converted))


# phones: ExecuTorch programs -------------------------------------------------------------


@dataclass
class Program:
    """A converted model lowered with the XNNPACK partitioner: the delegation report, what
    the test counted in the lowered program, what the converted model computes on the
    golden input (as it is, and with its biases rounded to int32 as XNNPACK adds them:
    ``shipped.with_int32_bias``) and what the float model does, and the ``.pte`` (None:
    not written)."""

    report: DelegationReport
    delegate_calls: int
    quantized_outside: list[str]
    eager: list[torch.Tensor]
    int32_bias_eager: list[torch.Tensor]
    reference: list[torch.Tensor] = field(default_factory=list)
    file: Path | None = None


def _lower(
    converted: torch.fx.GraphModule, inputs: tuple[torch.Tensor, ...]
) -> tuple[Any, Program]:
    with watch() as coverage:
        edge = to_edge_transform_and_lower(
            torch.export.export(converted, inputs), partitioner=[XnnpackPartitioner()]
        )
    graph = edge.exported_program().graph
    calls = [n for n in graph.nodes if n.op == "call_function" and str(n.target) == DELEGATE_CALL]
    outside = [
        n.name
        for n in graph.nodes
        if n.op == "call_function" and "quantized_decomposed" in str(n.target)
    ]
    with torch.no_grad():
        eager = list(_tuple(converted(*inputs)))
        int32_bias = list(_tuple(with_int32_bias(converted)(*inputs)))
    return edge, Program(coverage.report(edge), len(calls), outside, eager, int32_bias)


def _write(edge: Any, inputs: tuple[torch.Tensor, ...], program: Program, path: Path) -> None:
    path.write_bytes(edge.to_executorch().buffer)
    _golden(path, inputs, program.eager)
    program.file = path


class _Zoo(nn.Module):
    """Every zoo model, cut to its first layer, side by side on its own inputs (given one
    model's after another): one export and one lowering, whose fixed costs (ExecuTorch's
    decompositions and verifiers, run per program) are paid once instead of per model."""

    def __init__(self, models: list[nn.Module], arities: list[int]) -> None:
        super().__init__()
        self.models, self.arities = nn.ModuleList(models), arities

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outputs, start = [], 0
        for model, arity in zip(self.models, self.arities, strict=True):
            outputs.append(model(*inputs[start : start + arity]))
            start += arity
        return tuple(outputs)


def zoo_program(folder: Path) -> Program:
    """Every zoo model (its outputs in ``transformers_zoo.MODELS``' order), cut to its first
    layer, by the XNNPACK quantizer (per-channel), each calibrated as
    ``transformers_zoo.quantize`` does (seeds 1 to 4), as one ``.pte``."""
    built = [transformers_zoo.build(name) for name in transformers_zoo.MODELS]
    models = [transformers_zoo.first_layer(model) for model, _ in built]

    def inputs(seed: int) -> tuple[torch.Tensor, ...]:
        return tuple(t for _, by_seed in built for t in by_seed(seed))

    arities = [len(by_seed(0)) for _, by_seed in built]
    model, batch = _Zoo(models, arities).eval(), inputs(transformers_zoo.HELD_OUT)
    quantizer = qcore.get_quantizer("xnnpack", is_per_channel=True)
    prepared = prepare_pt2e(qcore.export(copy.deepcopy(model), inputs(0)), quantizer)
    with torch.no_grad():
        for seed in range(1, 5):
            prepared(*inputs(seed))
    edge, program = _lower(convert_pt2e(prepared), batch)
    with torch.no_grad():
        program.reference = list(model(*batch))
    _write(edge, batch, program, folder / "zoo.pte")
    return program


@dataclass
class FunctionalPrograms:
    ours: Program
    qparams: list[tuple[float, int]]
    theirs: Program
    their_error: str | None


def functional_programs(folder: Path, converted: torch.fx.GraphModule) -> FunctionalPrograms:
    """The functional convolutions as the XNNPACK quantizer converted them, as a ``.pte``;
    ExecuTorch's own quantizer's, lowered, and what ``to_executorch`` raised on it."""
    held_out = functional.inputs(functional.HELD_OUT)
    edge, ours = _lower(converted, held_out)
    ours.reference = functional.reference()
    _write(edge, held_out, ours, folder / "functional_convs.pte")

    theirs = functional.quantize(
        XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
    )
    their_edge, their_program = _lower(theirs, held_out)
    try:
        their_edge.to_executorch()
        their_error = None
    except RuntimeError as error:
        their_error = str(error)
    return FunctionalPrograms(ours, output_qparams(converted), their_program, their_error)


@dataclass
class DerivedProgram:
    program: Program
    qparams: list[tuple[float, int]]


def derived_program(folder: Path) -> DerivedProgram:
    """The mixed-layer model by ``qcore.get_quantizer("executorch")`` (derived from the FX
    backend), its 3-D convolution rewritten as a 2-D one first, as docs/shipping.md says
    (ExecuTorch runs no 3-D convolution), calibrated on four batches, as a ``.pte``."""
    (model_case,) = mixed_layer_cases()
    model, batches = model_case.model(), model_case.calibration_batches()
    exported = conv3d_as_conv2d(qcore.export(model, batches[0]))
    prepared = prepare_pt2e(exported, qcore.get_quantizer("executorch", model=model))
    with torch.no_grad():
        for batch in batches:
            prepared(*batch)
    converted = convert_pt2e(prepared)
    held_out = model_case.inputs(functional.HELD_OUT)
    edge, program = _lower(converted, held_out)
    with torch.no_grad():
        program.reference = [model(*held_out)]
    _write(edge, held_out, program, folder / "mixed_layers_executorch.pte")
    return DerivedProgram(program, output_qparams(converted))
