"""How much of a layer's relative output noise reaches the network's output through its
residual adds, read from the calibrated observers around them.

An add ``y = a + b`` passes each operand's noise on unchanged while its signal grows from
``P(a)`` to ``P(y)`` (``P``: mean square): relative to the signal, noise on ``a`` shrinks
by ``P(a) / P(y)``. A layer's **reach** is that factor multiplied over every add on its
way to the output (the largest over its ways). A branch's output rarely has an observer of
its own (the quantizer fuses the layer with the add), so its share is ``1 - P(b) / P(y)``
from the other operand's, as if the two were uncorrelated (on the zoo's MobileNetV3,
RegNet and Swin within 0.07 of the share on float activations; a layer's reach on
MobileNetV3 and MnasNet within 0.14, test_plan_reach.py). An add whose output power no
observer gives dilutes nothing: where an activation follows it (ResNet's relu), the
quantizer observes the activation's output, whose power is not the add's. :func:`residual_paths` reads the graph
once, when the observers are made (it keeps observers, not nodes: convert rewrites the
graph); :meth:`ResidualPaths.reach` reads the observers when the plan is made.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from torch.fx import Node

from qcore.pt2e.range_graph import ADDS

__all__ = ["ResidualPaths", "residual_paths"]

#: Where a way ends at the network's output, undiluted.
_OUTPUT = -1


@dataclass(frozen=True)
class _Add:
    output: Any | None  # the observer whose tensor is the add's output, if any
    operands: tuple[Any | None, Any | None]
    #: where its output goes: (a later add's index, operand) or (_OUTPUT, 0)
    exits: frozenset[tuple[int, int]]


@dataclass(frozen=True)
class ResidualPaths:
    """Each layer's ways to the output through residual adds (see the module docstring)."""

    adds: tuple[_Add, ...]  # in reverse graph order: an add's exits index earlier entries
    layers: Mapping[str, frozenset[tuple[int, int]]]

    def reach(self, power: Callable[[Any], float | None]) -> dict[str, float]:
        """Each layer's reach, with ``power(observer)`` the mean square an observer saw."""
        factors: list[float] = []
        for add in self.adds:  # a later add's factor is known before an earlier one asks
            factors.append(self._through(add.exits, factors, power))
        return {name: self._through(exits, factors, power) for name, exits in self.layers.items()}

    def _through(
        self,
        exits: Iterable[tuple[int, int]],
        factors: list[float],
        power: Callable[[Any], float | None],
    ) -> float:
        best = 0.0
        for index, operand in exits:
            if index == _OUTPUT:
                return 1.0
            best = max(best, _share(self.adds[index], operand, power) * factors[index])
        return best if exits else 1.0


def _share(add: _Add, operand: int, power: Callable[[Any], float | None]) -> float:
    """The factor by which ``add`` shrinks its ``operand``'s relative noise."""
    total = _power(add.output, power)
    if total is None:
        return 1.0
    own, other = (_power(add.operands[i], power) for i in (operand, 1 - operand))
    if own is not None:
        return min(own / total, 1.0)
    if other is not None:
        return min(max(1.0 - other / total, 0.0), 1.0)
    return 1.0


def _power(observer: Any | None, power: Callable[[Any], float | None]) -> float | None:
    value = None if observer is None else power(observer)
    return value if value is not None and value > 0 else None


def _observer_of(value: Node, mapping: Mapping[Any, Any], reader: Node | None) -> Any | None:
    """An observer of ``value``'s tensor: on its edge into ``reader``, on its output, or on
    its edge into any other reader."""
    for key in ((value, reader), value, *((value, user) for user in value.users)):
        if key in mapping:
            return mapping[key]
    return None


def _binary_add(node: Node) -> tuple[Node, Node] | None:
    if node.target not in ADDS or len(node.args) < 2:
        return None
    a, b = node.args[0], node.args[1]
    if not isinstance(a, Node) or not isinstance(b, Node) or a is b:
        return None
    return a, b


def residual_paths(
    nodes: Iterable[Node], mapping: Mapping[Any, Any], layers: Mapping[str, Node]
) -> ResidualPaths:
    """The ways of ``layers`` (by name) through the adds of the graph of ``nodes``, with
    ``mapping`` the quantizer's observers (``edge_or_node_to_obs_or_fq``)."""
    order = list(nodes)
    adds: list[_Add] = []
    index: dict[Node, int] = {}
    exits: dict[Node, frozenset[tuple[int, int]]] = {}
    for node in reversed(order):  # every reader's exits are known before the node's
        found: set[tuple[int, int]] = set()
        for user in node.users:
            operands = _binary_add(user)
            if user.op == "output":
                found.add((_OUTPUT, 0))
            elif operands is not None and user in index:
                found.add((index[user], operands.index(node)))
            else:
                found |= exits.get(user, frozenset())
        exits[node] = frozenset(found)
        operands = _binary_add(node)
        if operands is not None:
            index[node] = len(adds)
            observers = (_observer_of(operands[0], mapping, node), _observer_of(operands[1], mapping, node))
            adds.append(_Add(_observer_of(node, mapping, None), observers, exits[node]))
    return ResidualPaths(tuple(adds), {name: exits[node] for name, node in layers.items()})
