"""Which FX-mode call each node of an exported graph comes from.

FX graph mode sees a model as calls: a leaf module (anything from ``torch.nn`` or
``torch.ao.nn`` except containers, as torch's quantization tracer decides), a function
(``F.relu``, ``torch.add``, ``operator.add``) or a Tensor method (``"relu"``). An exported
graph holds aten nodes instead, with two records of where each came from: the module
stack (``nn_module_stack``) and the torch-level function (``torch_fn``, e.g.
``"builtin_function_or_method.add"``). This module turns them back into :class:`Call`\\ s,
so that a ``BackendConfig`` pattern, written in FX's vocabulary, can be matched on them.

One ambiguity is inherent: ``a + b`` and ``a.add(b)`` both record the method ``add``, so
the element ``operator.add`` and the method ``"add"`` match both.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from torch.fx import GraphModule, Node

from qcore.pt2e.annotation.claims import computing

#: Containers FX traces through: never a call of their own.
_CONTAINERS = frozenset(
    {
        "torch.nn.modules.container.Sequential",
        "torch.nn.modules.container.ModuleList",
        "torch.nn.modules.container.ModuleDict",
    }
)
#: ``operator`` functions FX records for Python operators, by the method export records.
OPERATOR_METHODS = {
    operator.add: "add",
    operator.iadd: "add_",
    operator.sub: "sub",
    operator.isub: "sub_",
    operator.mul: "mul",
    operator.imul: "mul_",
    operator.truediv: "div",
    operator.itruediv: "div_",
    operator.matmul: "matmul",
    operator.floordiv: "floor_divide",
    operator.getitem: "__getitem__",
}


def qualified_name(cls: Any) -> str:
    """``module.QualName`` of a class, or the string export already recorded."""
    if isinstance(cls, str):
        return cls
    return f"{cls.__module__}.{cls.__qualname__}"


def is_leaf_module_class(name: str) -> bool:
    """A module FX's quantization tracer does not trace into."""
    return name.startswith(("torch.nn.", "torch.ao.nn.")) and name not in _CONTAINERS


def signatures(element: Any) -> frozenset[str]:
    """What export records for a call of FX pattern element ``element``: ``module:<class>``,
    ``function.<name>``, ``builtin_function_or_method.<name>`` or ``method_descriptor.<name>``."""
    if isinstance(element, type):
        return frozenset({f"module:{qualified_name(element)}"})
    if isinstance(element, str):
        return frozenset({f"method_descriptor.{element}"})
    if element in OPERATOR_METHODS:
        # Tensor's dunder is recorded as the method it calls, or as itself when it is a
        # Python function (``__floordiv__``)
        dunder = f"function.__{element.__name__.strip('_')}__"
        return frozenset({f"method_descriptor.{OPERATOR_METHODS[element]}", dunder})
    name = getattr(element, "__name__", None)
    if name is None:
        return frozenset()
    kind = "function" if type(element).__name__ == "function" else "builtin_function_or_method"
    return frozenset({f"{kind}.{name}"})


@dataclass(frozen=True)
class Call:
    """One FX-level call: its signature, the aten nodes it computed, the node its value
    leaves by, its activation inputs in argument order, and where it sits in the model
    (``path``: the leaf module's name, or the enclosing module's for a function)."""

    signature: str
    nodes: tuple[Node, ...]
    output: Node
    inputs: tuple[Node, ...]
    path: str
    scope_type: str
    arity: int
    #: position among the graph's calls (by output node)
    order: int = 0
    #: a Tensor-method call whose receiver is a constant (computed from attributes only):
    #: FX traces ``constant + x`` as the method ``add``, never as ``operator.add``
    constant_receiver: bool = False

    @property
    def is_module(self) -> bool:
        return self.signature.startswith("module:")

    def users(self) -> list[Node]:
        inside = set(self.nodes)
        return [u for u in self.output.users if u not in inside]


def _leaf(node: Node) -> tuple[str, str] | None:
    """(path, class) of the outermost leaf module ``node`` was computed in, if any."""
    for path, cls in (node.meta.get("nn_module_stack") or {}).values():
        name = qualified_name(cls)
        if is_leaf_module_class(name):
            return str(path), name
    return None


def _scope(node: Node) -> tuple[str, str]:
    stack = list((node.meta.get("nn_module_stack") or {}).values())
    if not stack:
        return "", ""
    path, cls = stack[-1]
    return str(path), qualified_name(cls)


def _flat(args: Iterable[Any]) -> Iterable[Any]:
    for a in args:
        if isinstance(a, list | tuple):
            yield from _flat(a)
        else:
            yield a


def _activation_inputs(nodes: tuple[Node, ...]) -> tuple[Node, ...]:
    inside = set(nodes)
    seen: list[Node] = []
    for node in nodes:
        for a in _flat([*node.args, *node.kwargs.values()]):
            if isinstance(a, Node) and a not in inside and a.op != "get_attr" and a not in seen:
                seen.append(a)
    return tuple(seen)


def calls(gm: GraphModule) -> list[Call]:
    """Every FX-level call in ``gm``, in graph order (by output node)."""
    groups: dict[tuple[str, ...], list[Node]] = {}
    for node in gm.graph.nodes:
        if node.op != "call_function":
            continue
        leaf = _leaf(node)
        if leaf is not None:
            key: tuple[str, ...] = ("module", leaf[0], leaf[1])
        else:
            torch_fn = node.meta.get("torch_fn")
            if torch_fn is None:
                continue  # export's own bookkeeping (getitem of a multi-output op, ...)
            key = ("fn", node.name, str(torch_fn[1]))
        groups.setdefault(key, []).append(node)
    position = {n: i for i, n in enumerate(gm.graph.nodes)}
    live: set[Node] = set()
    for node in gm.graph.nodes:
        if node.op == "placeholder" or any(a in live for a in node.all_input_nodes):
            live.add(node)
    result: list[Call] = []
    for key, members in groups.items():
        inside = set(members)
        outputs = [n for n in members if any(u not in inside for u in n.users)] or members[-1:]
        for output in outputs:
            mine = (
                tuple(members)
                if len(outputs) == 1
                else tuple(n for n in members if n in computing(output, members))
            )
            if key[0] == "module":
                signature, path, scope = f"module:{key[2]}", key[1], key[2]
                arity = 1
            else:
                signature = key[2]
                path, scope = _scope(output)
                arity = len(output.args)
            receiver = output.args[0] if output.args else None
            constant = (
                signature.startswith("method_descriptor.")
                and isinstance(receiver, Node)
                and receiver not in live
            )
            result.append(
                Call(
                    signature,
                    mine,
                    output,
                    _activation_inputs(mine),
                    path,
                    scope,
                    arity,
                    constant_receiver=constant,
                )
            )
    result.sort(key=lambda c: position[c.output])
    return [replace(c, order=i) for i, c in enumerate(result)]
