"""Rewrite functional conv / linear calls into the one form torch's FX lowering reads.

torch's ``convert_fx`` lowers ``F.conv*`` and ``F.linear`` from their *positional*
arguments only: a call such as ``F.conv2d(x, w, b, padding=1)`` loses its padding, and
one that leaves ``stride`` to its default crashes
(``quantized::conv2d_prepack() is missing value for argument 'stride'``). After this pass
every such call passes every argument positionally, with defaults filled in and ints
spelled as the n-tuples the prepack ops take, so the meaning is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch.fx import GraphModule, Node, Proxy
from torch.overrides import TorchFunctionMode

__all__ = [
    "FUNCTIONAL_SIGNATURES",
    "FunctionalSignature",
    "PositionalFunctionals",
    "UnquantizableCall",
    "normalize_functional_calls",
    "normalized_args",
]


@dataclass(frozen=True)
class FunctionalSignature:
    """Parameter names and defaults of a builtin functional (they have no Python
    signature to inspect), and which parameters are per-spatial-dimension tuples."""

    params: tuple[str, ...]
    defaults: dict[str, Any]
    spatial: int = 0
    tuple_params: frozenset[str] = frozenset()


class UnquantizableCall(ValueError):
    """A functional call whose arguments int8 cannot express as written; the message
    names the call and what to change."""


def _conv(n: int) -> FunctionalSignature:
    return FunctionalSignature(
        ("input", "weight", "bias", "stride", "padding", "dilation", "groups"),
        {"bias": None, "stride": 1, "padding": 0, "dilation": 1, "groups": 1},
        n,
        frozenset({"stride", "padding", "dilation"}),
    )


def _conv_transpose(n: int) -> FunctionalSignature:
    return FunctionalSignature(
        ("input", "weight", "bias", "stride", "padding", "output_padding", "groups", "dilation"),
        {"bias": None, "stride": 1, "padding": 0, "output_padding": 0, "groups": 1, "dilation": 1},
        n,
        frozenset({"stride", "padding", "output_padding", "dilation"}),
    )


FUNCTIONAL_SIGNATURES: dict[Callable[..., Any], FunctionalSignature] = {
    F.conv1d: _conv(1),
    F.conv2d: _conv(2),
    F.conv3d: _conv(3),
    F.conv_transpose1d: _conv_transpose(1),
    F.conv_transpose2d: _conv_transpose(2),
    F.conv_transpose3d: _conv_transpose(3),
    F.linear: FunctionalSignature(("input", "weight", "bias"), {"bias": None}),
}
"""The functionals torch's FX lowering reads positionally."""


def _expand(value: Any, n: int) -> Any:
    if isinstance(value, int):
        return (value,) * n
    if isinstance(value, list | tuple) and len(value) == 1 and n > 1:
        return tuple(value) * n
    return tuple(value) if isinstance(value, list) else value


def _same_padding(where: str, weight_shape: Any, dilation: Any, n: int) -> tuple[int, ...]:
    """Explicit symmetric padding for ``padding='same'``, which the prepack ops lack."""
    if weight_shape is None or not all(isinstance(d, int) for d in dilation):
        raise UnquantizableCall(
            f"{where}: padding='same' needs a weight of known shape to quantize; "
            "pass explicit padding"
        )
    kernel = tuple(int(s) for s in weight_shape[-n:])
    totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
    if any(t % 2 for t in totals):
        raise UnquantizableCall(
            f"{where}: padding='same' with kernel {kernel} pads one side more than the "
            "other, which int8 convolution cannot express; pass explicit padding or keep "
            "this call in float"
        )
    return tuple(t // 2 for t in totals)


def normalized_args(
    where: str,
    sig: FunctionalSignature,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    shape_of: Callable[[Any], Any],
) -> tuple[Any, ...]:
    """Every argument of a call to ``sig``, positional, defaults filled, tuples spelled out.

    ``where`` names the call in errors; ``shape_of(weight)`` gives the weight's shape or
    None (only ``padding='same'`` needs it).
    """
    if len(args) > len(sig.params):
        raise UnquantizableCall(f"{where}: too many arguments")
    values = dict(zip(sig.params, args, strict=False))
    for key, value in kwargs.items():
        if key not in sig.params:
            raise UnquantizableCall(f"{where}: unexpected argument '{key}'")
        if key in values:
            raise UnquantizableCall(f"{where}: '{key}' given twice")
        values[key] = value
    missing = [p for p in sig.params if p not in values and p not in sig.defaults]
    if missing:
        raise UnquantizableCall(f"{where}: missing {', '.join(missing)}")
    for name in sig.params:
        values.setdefault(name, sig.defaults.get(name))
        if name in sig.tuple_params:
            values[name] = _expand(values[name], sig.spatial)
    padding = values.get("padding")
    if padding == "valid":
        values["padding"] = (0,) * sig.spatial
    elif padding == "same":
        values["padding"] = _same_padding(
            where, shape_of(values["weight"]), values["dilation"], sig.spatial
        )
    return tuple(values[p] for p in sig.params)


def _attr(root: Any, target: str) -> Any:
    value: Any = root
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _node_shape(value: Any) -> Any:
    if not isinstance(value, Node):
        return getattr(value, "shape", None)
    meta = value.meta.get("val", value.meta.get("tensor_meta"))
    if meta is not None:
        return getattr(meta, "shape", None)
    owner = value.graph.owning_module
    if value.op == "get_attr" and owner is not None:
        return getattr(_attr(owner, str(value.target)), "shape", None)
    return None


def _proxy_shape(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.shape
    if isinstance(value, Proxy) and value.node.op == "get_attr":
        root = getattr(value.tracer, "root", None)
        if isinstance(root, torch.nn.Module):
            # attribute access is patched to return proxies while tracing; these are not
            target = str(value.node.target)
            tensors = dict(root.named_parameters()) | dict(root.named_buffers())
            return tensors[target].shape if target in tensors else None
    return None


class PositionalFunctionals(TorchFunctionMode):
    """While tracing, record functional conv / linear calls in positional form.

    Active around torch's own ``prepare_fx``, so its tracer (and the module scopes it
    records for qconfigs) is untouched; every other call passes through unchanged.
    """

    def __torch_function__(
        self,
        func: Any,
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        sig = FUNCTIONAL_SIGNATURES.get(func)
        kwargs = kwargs or {}
        if sig is not None and any(isinstance(a, Proxy) for a in (*args, *kwargs.values())):
            name = getattr(func, "__name__", str(func))
            args, kwargs = normalized_args(f"call to {name}", sig, args, kwargs, _proxy_shape), {}
        return func(*args, **kwargs)


def normalize_functional_calls(model: GraphModule) -> GraphModule:
    """Rewrite, in place, every functional conv / linear call of a traced graph to
    positional form (for graphs traced without :class:`PositionalFunctionals`)."""
    changed = False
    for node in model.graph.nodes:
        sig = FUNCTIONAL_SIGNATURES.get(node.target) if node.op == "call_function" else None
        if sig is None:
            continue
        where = f"node '{node.name}' ({getattr(node.target, '__name__', node.target)})"
        args = normalized_args(where, sig, node.args, dict(node.kwargs), _node_shape)
        if args != node.args or node.kwargs:
            node.args, node.kwargs = args, {}
            changed = True
    if changed:
        model.recompile()
    return model
