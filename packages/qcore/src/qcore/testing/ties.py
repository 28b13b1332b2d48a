"""Which output codes of an eager converted model hang on a rounding tie.

A requantize rounds ``x / scale``; when that lands on a half step, eager (float32, aten's
summation order) and a compiled kernel (another order, or integers) may round it either
way, and both are right. Most ties are float coincidences, rare enough for
:data:`qcore.testing.codes.MAX_OFF_BY_ONE`. Some are structural: the mean of ``N``
integer codes (an average pool) is a half step about once in ``N``, and one such code
moves every output of the layer that reads it.

:func:`tie_variants` runs the converted model again with its own ties broken the other
way, and returns those outputs. An output code that no variant changes must be equal;
a code some variant changes may be off by one step, the way the variants move it, on a
bounded share of the codes (:func:`qcore.testing.codes.compare_outputs` with
``variants``)::

    variants = tie_variants(converted, inputs)
    diffs = compare_outputs(converted(*inputs), compiled(*inputs), variants=variants)
    assert all(d.exact for d in diffs), diffs
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import Tensor
    from torch.fx import GraphModule, Node

__all__ = ["TIE_MARGIN", "MAX_VARIANTS", "tie_variants"]

#: How close to a half step (in codes) a requantized value counts as a tie: float32
#: keeps a value of at most 255 steps within about 3e-5 steps of its exact sum.
TIE_MARGIN = 1e-3
#: At most this many re-runs: beyond it, ties are broken the other way in groups (each
#: group's outputs then cover every tie in it at once).
MAX_VARIANTS = 32

_QUANTIZE = ("quantized_decomposed.quantize_per_tensor.",)

#: one tie: the quantize node's name and the flat index of the element
_Tie = tuple[str, int]


def _is_quantize(node: Node) -> bool:
    return node.op == "call_function" and str(node.target).startswith(_QUANTIZE)


def _interpreter(model: GraphModule, flips: set[_Tie] | None, found: list[_Tie]) -> Any:
    import torch
    from torch.fx import Interpreter

    class _Run(Interpreter):
        """The model, recording its requantize ties and breaking ``flips`` the other way."""

        def run_node(self, node: Node) -> Any:
            out = super().run_node(node)
            if not _is_quantize(node) or not isinstance(out, torch.Tensor):
                return out
            args, _ = self.fetch_args_kwargs_from_env(node)
            x, scale, zero_point, quant_min, quant_max = args[:5]
            steps = x.detach().float() * (1.0 / float(scale))
            floor = torch.floor(steps)
            near = ((steps - floor - 0.5).abs() < TIE_MARGIN).flatten()
            found.extend((node.name, int(i)) for i in near.nonzero().flatten().tolist())
            mine = [i for name, i in (flips or ()) if name == node.name]
            if mine:
                out = out.contiguous().clone()  # a transposed input's codes are strided
                flat, low = out.view(-1), floor.flatten()
                for i in mine:
                    code = int(flat[i]) - int(zero_point)
                    other = int(low[i]) + (0 if code == int(low[i]) + 1 else 1)
                    flat[i] = min(max(other + int(zero_point), int(quant_min)), int(quant_max))
            return out

    return _Run(model)


def _groups(ties: Sequence[_Tie]) -> list[set[_Tie]]:
    count = min(len(ties), MAX_VARIANTS)
    return [set(ties[i::count]) for i in range(count)] if count else []


def tie_variants(model: GraphModule, inputs: Sequence[Tensor]) -> list[Any]:
    """The outputs of ``model`` (an eager converted PT2E model) on ``inputs`` with its
    requantize ties broken the other way: one output per tie, or per group of ties when
    there are more than :data:`MAX_VARIANTS`. Empty when no requantize lands on a tie."""
    import torch
    from torch.fx import GraphModule

    if not isinstance(model, GraphModule):
        raise TypeError(
            f"tie_variants reads a converted model's graph: got {type(model).__name__}, "
            "not a torch.fx.GraphModule"
        )
    ties: list[_Tie] = []
    with torch.no_grad():
        _interpreter(model, None, ties).run(*inputs)
        return [_interpreter(model, group, []).run(*inputs) for group in _groups(ties)]
