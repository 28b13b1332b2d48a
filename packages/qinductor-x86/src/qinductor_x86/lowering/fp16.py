"""fp16 dynamic linear: a linear whose weight is an fp16 constant upcast to float32 becomes
oneDNN's ``linear_dynamic_fp16`` on a prepacked fp16 weight (``linear_relu_dynamic_fp16``
with a following relu), as torch 2.13's copy of the x86 passes does.

The float code is what ``get_x86_inductor_linear_dynamic_fp16_config`` converts a linear
to: ``F.linear(x, w.to(float16).to(float32), b)``, the casts being quantized_decomposed's
``convert_element_type.no_fuse`` (kept apart so that no fusion folds them). The family is
that layer traced at each of weight prepack's linear layouts (:data:`prepack.FORMS`),
with and without a bias, with and without a relu.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import torch
from torch.fx import Node

from qinductor_x86 import _torch_private as private
from qinductor_x86.lowering import ops, prepack, tracing
from qinductor_x86.lowering.context import current, val
from qinductor_x86.lowering.counters import Family
from qinductor_x86.lowering.ops import qd

#: quantized_decomposed's cast that no fusion folds: what an fp16 weight is read through.
CAST = qd.convert_element_type.no_fuse
LINEAR_FORMS = tuple(form for form in prepack.FORMS if form.kind == "linear")
#: relu fused? -> oneDNN's fp16 kernel
KERNELS = {False: ops.LINEAR_DYNAMIC_FP16, True: ops.LINEAR_RELU_DYNAMIC_FP16}


def holds_fp16_weight(node: Node) -> bool:
    """Whether ``node`` reads a weight stored in fp16 (what makes a graph one to lower)."""
    # (bool(): from torch 2.15 the stubs type a dtype comparison as possibly symbolic)
    return node.target is CAST and bool(node.args[1] == torch.float16)


def _region(form: prepack.Form, bias: bool, relu: bool) -> Callable[..., torch.Tensor]:
    def region(x: torch.Tensor, w: torch.Tensor, *b: torch.Tensor) -> torch.Tensor:
        weight = CAST(CAST(w, torch.float16), torch.float32)
        y = form.compute(x, weight, b[0] if bias else None)
        return torch.relu(y) if relu else y

    return region


def _example(form: prepack.Form, bias: bool) -> list[torch.Tensor]:
    x = torch.randn(form.x_shape)
    examples = [x.transpose(0, 1) if form.transposed_input else x, torch.randn(form.w_shape)]
    return examples + ([torch.randn(form.w_shape[0])] if bias else [])


def register(pass_dict: Any) -> None:
    """Trace every row and register it into ``pass_dict``; a relu is fused when present
    (the pattern ending in it is found first: matching runs from the graph's end)."""
    for form, bias, relu in itertools.product(LINEAR_FORMS, (True, False), (True, False)):
        pattern = tracing.trace(
            _region(form, bias, relu), _example(form, bias), ["x", "w", *(["b"] if bias else [])]
        )
        private.register_graph_pattern(pattern, extra_check=_check, pass_dict=pass_dict)(
            _rewriter(form, relu)
        )


def _check(match: Any) -> bool:
    """A float32 activation and a weight that is a frozen constant, used as ``F.linear``
    uses it (prepack's layout check)."""
    ctx = current()
    x = val(match.kwargs["x"])
    if x is None or x.dtype != torch.float32 or ctx.constant(match.kwargs["w"]) is None:
        return False
    return prepack.linear_layout_ok(match, x, match.kwargs)


def _rewriter(form: prepack.Form, relu: bool) -> Callable[..., None]:
    def rewrite(match: Any, *args: Any, **kwargs: Any) -> None:
        ctx = current()
        out = match.output_node()
        weight = ctx.constant(kwargs["w"])
        assert weight is not None
        x = kwargs["x"]
        x_shape = prepack.static_shape(val(x))
        packed = private.prepack_linear_fp16(weight, x_shape)
        with ctx.graph.inserting_before(out):
            packed_node = ctx.constant_node("_qinductor_x86_packed_fp16", packed)
            result = ctx.call(KERNELS[relu], (x, packed_node, kwargs.get("b")))
        out.replace_all_uses_with(result)
        match.erase_nodes()
        ctx.record(
            f"{form.name} fp16 dynamic weight prepack{' + relu' if relu else ''}",
            Family.QLINEAR_WEIGHT_PREPACK,
            len(match.nodes),
            match,
        )

    return rewrite
