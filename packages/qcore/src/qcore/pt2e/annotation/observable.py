"""Whether a tensor can be observed: the checks every annotator makes before it quantizes.

An int8 observer on an index or a mask computes nonsense, histogram observers crash on
values beyond ``torch.histc``'s range, and an additive attention mask holding
``finfo.min`` makes an int8 scale that rounds every other value to zero. An annotator
leaves such a pattern in float (:func:`non_quantizable_reason`, :func:`is_float_tensor`);
``RegistryQuantizer`` names one that does not (:func:`non_float_quantized`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.fx import GraphModule, Node

from qcore._torch_private import Q_ANNOTATION_KEY, annotation_is_claimed, is_fake_tensor
from qcore.pt2e.annotation import ops
from qcore.pt2e.annotation.claims import is_op

aten = torch.ops.aten

#: torch.histc, behind HistogramObserver, fails on values above this.
HISTC_UPPER_BOUND = 3.4028235e15


def is_float_tensor(node: object) -> bool:
    """Whether ``node`` is a graph value whose traced value is a floating-point tensor:
    the only kind an observer may see (an int8 observer on an index or a mask computes
    nonsense, and histogram observers crash on it)."""
    if not isinstance(node, Node):
        return False
    val = node.meta.get("val")
    return isinstance(val, torch.Tensor) and val.dtype.is_floating_point


def non_float_quantized(node: Node) -> list[str]:
    """The tensors a claimed annotation on ``node`` would observe that are not floating
    point, as ``"name (dtype)"``: empty for every annotation a quantizer may write."""
    ann = node.meta.get(Q_ANNOTATION_KEY)
    if ann is None or not annotation_is_claimed(ann):
        return []
    quantized = [n for n, spec in ann.input_qspec_map.items() if spec is not None]
    if ann.output_qspec is not None:
        quantized.append(node)
    return [
        f"{n.name} ({', '.join(str(d) for d in dtypes)})"
        for n in quantized
        if isinstance(n, Node) and (dtypes := _non_float_dtypes(n.meta.get("val")))
    ]


def _non_float_dtypes(val: object) -> list[torch.dtype]:
    """The non-floating-point dtypes of a traced value (a tensor, or a tuple of them);
    nothing for a value not recorded (the check is about known integer tensors)."""
    if isinstance(val, torch.Tensor):
        return [] if val.dtype.is_floating_point else [val.dtype]
    if isinstance(val, list | tuple):
        return [d for v in val for d in _non_float_dtypes(v)]
    return []


def non_quantizable_reason(node: Node, gm: GraphModule) -> str | None:
    """Why an activation input cannot be observed, or None if it can."""
    val = node.meta.get("val")
    if not is_fake_tensor(val):  # (None is no fake tensor)
        return "input has no traced tensor value"
    if val.dtype != torch.float32:
        return f"input is a non-float tensor ({val.dtype})"
    huge = _large_scalar(node, gm)
    if huge is not None and node.op == "get_attr":
        return f"input is a scalar too large to observe ({huge:g})"
    mask = None if huge is not None else additive_mask_value(node, gm)
    if mask is not None:
        return (
            f"input is an additive mask holding {mask:g}: an int8 scale spanning it rounds "
            "every other value to zero"
        )
    return None


def _large_scalar(node: object, gm: GraphModule) -> float | None:
    """The value of a one-element ``get_attr`` tensor or a Python number beyond what an
    observer can take, else None."""
    value: float | None = None
    if isinstance(node, int | float) and not isinstance(node, bool):
        value = float(node)
    elif isinstance(node, Node) and node.op == "get_attr":
        module_path, _, name = str(node.target).rpartition(".")
        tensor = getattr(gm.get_submodule(module_path), name, None)
        if isinstance(tensor, torch.Tensor) and tensor.numel() == 1:
            value = float(tensor.item())
    return value if value is not None and abs(value) > HISTC_UPPER_BOUND else None


#: Ops whose output holds one of their scalar or constant arguments (``where(mask, 0,
#: finfo.min)``, ``masked_fill``, ``full``) or scales by one (``(1 - mask) * finfo.min``).
#: The in-place fills too: ``export(...).module()``, the graph users quantize, keeps
#: ``masked_fill_`` and ``fill_`` as written (only a decomposition makes them functional).
_CONSTANT_FILLS = frozenset(
    {
        aten.where.self,
        aten.where.ScalarOther,
        aten.where.ScalarSelf,
        aten.where.Scalar,
        aten.masked_fill.Scalar,
        aten.masked_fill_.Scalar,
        aten.full.default,
        aten.full_like.default,
        aten.new_full.default,
        aten.fill.Scalar,
        aten.fill_.Scalar,
        aten.mul.Tensor,
    }
)


def additive_mask_value(node: Node, gm: GraphModule) -> float | None:
    """The huge constant (beyond :data:`HISTC_UPPER_BOUND`, e.g. ``finfo.min``) that
    ``node`` holds where it masks, if it is built from one: Hugging Face's attention
    masks are ``where(mask, 0, finfo(float32).min)``. Such a tensor added to attention
    scores must stay in float: its observed range would make the add's scale ~1e36.

    A mask computed from constants alone (a ViT's, which masks nothing) is evaluated:
    it is a mask here only if the huge value is really in it."""
    huge = _built_from_huge_constant(node, gm)
    if huge is None or _reads_graph_inputs(node):
        return huge
    value = _evaluate_constant(node, gm)
    if value is not None and bool((value.abs() <= HISTC_UPPER_BOUND).all()):
        return None
    return huge


def _reads_graph_inputs(node: Node) -> bool:
    seen, stack = {node}, [node]
    while stack:
        current = stack.pop()
        if current.op == "placeholder":
            return True
        for arg in current.all_input_nodes:
            if arg not in seen:
                seen.add(arg)
                stack.append(arg)
    return False


def _evaluate_constant(node: Node, gm: GraphModule) -> torch.Tensor | None:
    """The value of a node computed from attributes and constants only (no graph input),
    by running its ancestors; None if one of them cannot run outside the graph."""
    values: dict[Node, Any] = {}

    def value_of(n: Node) -> Any:
        if n in values:
            return values[n]
        if n.op == "get_attr":
            module_path, _, name = str(n.target).rpartition(".")
            result = getattr(gm.get_submodule(module_path), name)
        elif n.op == "call_function" and callable(n.target):
            args = torch.fx.node.map_arg(n.args, value_of)
            kwargs = torch.fx.node.map_arg(n.kwargs, value_of)
            result = n.target(*args, **kwargs)
        else:
            raise LookupError(n.name)
        values[n] = result
        return result

    try:
        with torch.no_grad():
            out = value_of(node)
    except (LookupError, RuntimeError, TypeError):
        return None
    return out if isinstance(out, torch.Tensor) else None


def _built_from_huge_constant(node: Node, gm: GraphModule) -> float | None:
    """The large scalar that ``node`` is filled with, looking back through constant fills
    and ops that only move values, however many (a walk, not a recursion: a long chain of
    views must not hit Python's recursion limit), or None."""
    pending: list[tuple[object, bool]] = [(node, False)]  # (value, an argument of a fill)
    seen: set[Node] = set()
    while pending:
        value, filled_from = pending.pop()
        if filled_from:
            huge = _large_scalar(value, gm)
            if huge is not None:
                return huge
        if not isinstance(value, Node) or value in seen:
            continue
        seen.add(value)
        if is_op(value, ops.SAME_VALUES):
            pending.append((value.args[0], False))
        elif is_op(value, _CONSTANT_FILLS):
            # reversed: the first argument is looked at first, as the fill reads them
            pending.extend((arg, True) for arg in reversed([*value.args, *value.kwargs.values()]))
    return None
