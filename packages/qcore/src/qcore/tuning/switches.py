"""A converted model whose quantization can be switched off op by op, without re-preparing.

Both flows convert to the same shape when asked for their reference form: every
quantized tensor passes through a quantize node and its dequantize nodes (PT2E's
``quantized_decomposed`` ops, FX's ``torch.quantize_per_*`` and ``.dequantize()``), and
every op computes in float on what they give it; FX's reference modules quantize their
own weight in ``get_weight()``. :class:`Switchboard` puts a switch on each use of a
dequantized value, which hands the consumer either the dequantized value or the float
value that was quantized, and decides each switch from who asked for the quantization:

* an *op* is a node the flow quantizes (:class:`Roles`) that reads a dequantized value
  or quantizes its own weight; nodes the flow quantizes that read neither (the ReLU of a
  fused conv-ReLU) belong to the op upstream of them;
* a quantize node is *owned* by the op that produced its input, if that op quantizes its
  output, and by every op that reads it. It is on while any of its owners is quantized:
  an op left in float still reads a quantized input if its producer quantizes its output,
  as both flows do when they leave one op out.

With every switch off the model computes the float model's function. This is a model of
what re-preparing with an op excluded gives, not the same graph: an annotation that
depends on a neighbour's (an output sharing its input's observer) is not re-decided, so
``qcore.tune`` checks its final choice on a model prepared from its configuration.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule, Node
from torch.fx.node import map_arg

__all__ = ["QuantizedOp", "Roles", "Switchboard"]


@dataclass(frozen=True)
class QuantizedOp:
    """One op the flow quantizes: its node (the name in the exported or traced graph),
    the module it runs in (``""``: the model's own ``forward``) and its kind."""

    name: str
    module_path: str
    kind: str
    #: Node names of the op: the op itself first, then the nodes fused into it.
    members: tuple[str, ...] = ()
    #: How the flow's configuration addresses the op (flow-specific; None: it cannot).
    address: Any = field(default=None, compare=False, repr=False)
    #: Why the configuration cannot address it, when it cannot.
    unaddressable: str = ""

    @property
    def where(self) -> str:
        return f"{self.name} in {self.module_path or '<model>'}"


@dataclass
class Roles:
    """What a flow says about its prepared graph, by node name: the nodes it quantizes
    (inputs, weights or output), those whose output it quantizes, and where each is."""

    quantizing: set[str] = field(default_factory=set)
    output_quantized: set[str] = field(default_factory=set)
    #: node name -> (module path, kind, address, why unaddressable)
    places: dict[str, tuple[str, str, Any, str]] = field(default_factory=dict)


_FX_QUANTIZE = (torch.quantize_per_tensor, torch.quantize_per_channel)


def is_quantize(node: Node) -> bool:
    if node.op != "call_function":
        return False
    if node.target in _FX_QUANTIZE:
        return True
    return str(node.target).startswith("quantized_decomposed.quantize_per_")


def is_dequantize(node: Node) -> bool:
    if node.op == "call_method":
        return node.target == "dequantize"
    return node.op == "call_function" and str(node.target).startswith(
        "quantized_decomposed.dequantize_per_"
    )


class Switch(nn.Module):
    """Gives its consumer the dequantized value (on) or the float value (off)."""

    def __init__(self) -> None:
        super().__init__()
        self.on = True

    def forward(self, dequantized: Any, original: Any) -> Any:
        return dequantized if self.on else original


class _FloatWeight:
    """``get_weight`` of a reference module left in float: the weight as it is."""

    def __init__(self, module: nn.Module) -> None:
        self.module = module

    def __call__(self) -> Any:
        return self.module.weight


def _weight_quantizers(module: nn.Module) -> list[nn.Module]:
    """FX reference modules (they quantize their weight in ``get_weight``) in ``module``."""
    return [
        m for m in module.modules() if hasattr(m, "weight_qscheme") and hasattr(m, "get_weight")
    ]


def _inputs(node: Node) -> list[Node]:
    found: list[Node] = []
    map_arg((node.args, node.kwargs), lambda n: found.append(n) or n)  # type: ignore[func-returns-value]
    return found


class Switchboard:
    """``model`` (a converted reference graph, changed in place) with a switch per
    quantized use, and the ops that own them; see the module docstring."""

    def __init__(self, model: GraphModule, roles: Roles) -> None:
        self.model = model
        modules = dict(model.named_modules())
        weights: dict[str, list[nn.Module]] = {}
        anchors: list[Node] = []
        for node in model.graph.nodes:
            if node.name not in roles.quantizing or node.op not in (
                "call_function",
                "call_method",
                "call_module",
            ):
                continue
            own = _weight_quantizers(modules[node.target]) if node.op == "call_module" else []
            if own:
                weights[node.name] = own
            if own or any(is_dequantize(i) for i in _inputs(node)):
                anchors.append(node)
        anchor_names = {a.name for a in anchors}
        group: dict[str, str] = {a.name: a.name for a in anchors}
        for node in model.graph.nodes:  # topological: a tail's producer is grouped first
            if node.name in roles.quantizing and node.name not in group:
                upstream = [
                    group[i.name] for i in _inputs(node) if i.name in group and not is_dequantize(i)
                ]
                if upstream:
                    group[node.name] = upstream[0]
        members: dict[str, list[str]] = {a: [a] for a in anchor_names}
        for name, owner in group.items():
            if name != owner:
                members[owner].append(name)
        self.ops: list[QuantizedOp] = []
        for anchor in anchors:
            path, kind, address, why = roles.places.get(
                anchor.name, ("", str(anchor.target), None, "no place recorded")
            )
            if address is not None:  # the nodes fused into the op are addressed with it
                for member in members[anchor.name][1:]:
                    address = (*address, *(roles.places.get(member, ("", "", None, ""))[2] or ()))
            self.ops.append(
                QuantizedOp(anchor.name, path, kind, tuple(members[anchor.name]), address, why)
            )
        self._weights = weights
        #: (switch, owners): on while any owner is quantized; no owner: always on
        self._switches: list[tuple[Switch, frozenset[str]]] = []
        for node in list(model.graph.nodes):
            if not is_quantize(node):
                continue
            source = node.args[0]
            assert isinstance(source, Node)
            owners = set()
            if source.name in roles.output_quantized and source.name in group:
                owners.add(group[source.name])
            for dq in [u for u in node.users if is_dequantize(u)]:
                owners.update(group[u.name] for u in dq.users if u.name in anchor_names)
            switch = Switch()
            target = f"_qcore_switch_{len(self._switches)}"
            model.add_submodule(target, switch)
            for dq in [u for u in node.users if is_dequantize(u)]:
                for user in list(dq.users):
                    with model.graph.inserting_before(user):
                        chosen = model.graph.call_module(target, (dq, source))
                    user.replace_input_with(dq, chosen)
            self._switches.append((switch, frozenset(owners)))
        model.graph.lint()
        model.recompile()

    @property
    def names(self) -> list[str]:
        return [op.name for op in self.ops]

    def quantize_only(self, quantized: Iterable[str]) -> GraphModule:
        """Quantize the ops named, leave every other op in float; returns the model."""
        chosen = set(quantized)
        unknown = chosen - set(self.names)
        if unknown:
            raise KeyError(f"no quantized op named {sorted(unknown)}")
        for switch, owners in self._switches:
            switch.on = not owners or bool(owners & chosen)
        for name, modules in self._weights.items():
            for module in modules:
                if name in chosen:
                    module.__dict__.pop("get_weight", None)
                else:
                    module.__dict__["get_weight"] = _FloatWeight(module)
        return self.model

    def quantize_all_but(self, floating: Iterable[str]) -> GraphModule:
        """Quantize every op except those named."""
        left = set(floating)
        return self.quantize_only(n for n in self.names if n not in left)
