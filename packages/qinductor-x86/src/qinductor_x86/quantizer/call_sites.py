"""Which module or function call each node of an exported graph comes from, one call site
at a time.

The x86 recipe recognises patterns by their source, as torchao 0.18 does: a ``conv2d``
node counts as a convolution when it comes from an ``nn.Conv2d``, a ``relu`` node as a
fusable ReLU when it comes from an ``nn.ReLU``, and so on (torch's
``get_source_partitions`` decides, from the node metadata export records). torch groups
nodes by module *instance*, so a module called at several sites (torchvision's
``BasicBlock`` calls one ``self.relu`` twice) becomes one partition with several
outputs, which torchao rejects ("Input partition has more than one output node"). Here
such a partition is split into one :class:`CallSite` per output, each holding the nodes that
compute it, so every call site matches on its own.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch.fx import GraphModule, Node

from qcore.pt2e.annotation.claims import computing
from qinductor_x86._torch_private import get_source_partitions


@dataclass(frozen=True)
class CallSite:
    """One call of a module or function: ``output`` is the node its result leaves by,
    ``nodes`` every node the call computed (what a matched pattern claims)."""

    output: Node
    nodes: tuple[Node, ...]

    def feeds(self, other: CallSite) -> bool:
        """Some node of this call is an input of some node of ``other``."""
        inside = set(other.nodes)
        return any(user in inside for node in self.nodes for user in node.users)


def calls(gm: GraphModule, sources: Sequence[Any]) -> list[CallSite]:
    """Every call of ``sources`` (module types, functions, or the function names export
    records) in ``gm``, in torch's partition order, call sites of one instance split."""
    found = get_source_partitions(gm.graph, list(sources))
    position = {node: i for i, node in enumerate(gm.graph.nodes)}
    result: list[CallSite] = []
    for partition in itertools.chain.from_iterable(found.values()):
        outputs = sorted(partition.output_nodes, key=position.__getitem__)
        if len(outputs) == 1:
            result.append(CallSite(outputs[0], tuple(partition.nodes)))
            continue
        for output in outputs:
            mine = computing(output, partition.nodes)
            result.append(CallSite(output, tuple(n for n in partition.nodes if n in mine)))
    return result


def chains(gm: GraphModule, kinds: Sequence[Sequence[Any]]) -> list[tuple[CallSite, ...]]:
    """Sequences of calls, one per entry of ``kinds`` (each a list of sources), where each
    call feeds the next. Ordered as torchao's ``find_sequential_partitions`` orders its
    candidates (by the first call, then the second, ...), which decides who wins when two
    candidates share a node."""
    candidates: list[tuple[CallSite, ...]] = [(c,) for c in calls(gm, kinds[0])]
    for sources in kinds[1:]:
        following = calls(gm, sources)
        candidates = [(*chain, c) for chain in candidates for c in following if chain[-1].feeds(c)]
    return candidates
