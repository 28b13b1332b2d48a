"""torch's counters for its x86 int8 passes, incremented here with the same meaning.

Each pattern family has a ``<name>_count`` (one per rewrite) and a ``<name>_nodes`` (the
nodes torch's pattern for that rewrite matches) in ``torch._dynamo.utils.counters
["inductor"]``. Tests and tooling written against torch's passes read them, so this
lowering bumps the same keys, with torch's node counts (see ``nodes`` in :func:`bump`).

torch also counts each of those rewrites in Inductor's generic ``pattern_matcher_count``
/ ``pattern_matcher_nodes`` (every one of them is a pattern match there, lowerings
included). Ours are not all pattern matches, and ours match fewer or more nodes, so
:func:`bump` tops the generic pair up to what torch's rewrite would have added.
"""

from __future__ import annotations

from enum import Enum

from qinductor_x86 import _torch_private as private


class Family(Enum):
    """A pattern family torch counts, valued by every key prefix that means it (torch
    2.13's first). The one declaration of the keys this lowering bumps: a handler names
    its family as ``Family.X``, so a misspelt one fails at import and in mypy."""

    DEQUANT_PROMOTION = ("dequant_promotion_matcher",)
    QCONV_WEIGHT_PREPACK = ("qconv_weight_prepack_matcher",)
    QLINEAR_WEIGHT_PREPACK = ("qlinear_weight_prepack_matcher",)
    QCONV_UNARY = ("qconv_unary_matcher", "qconv2d_unary_matcher")
    QCONV_BINARY = ("qconv2d_binary_matcher",)
    QLINEAR_UNARY = ("qlinear_unary_matcher",)
    QLINEAR_BINARY = ("qlinear_binary_matcher",)
    QMAXPOOL2D = ("qmaxpool2d_matcher",)
    QCAT = ("qcat_matcher",)
    QRESHAPE = ("qreshape_matcher",)
    WOQ = ("woq_matcher",)
    QCONV_UNARY_LOWER = ("qconv_unary_lower",)
    QCONV_BINARY_LOWER = ("qconv2d_binary_lower",)
    QLINEAR_UNARY_LOWER = ("qlinear_unary_lower",)
    QLINEAR_BINARY_LOWER = ("qlinear_binary_lower",)

    @property
    def prefixes(self) -> tuple[str, ...]:
        prefixes: tuple[str, ...] = self.value
        return prefixes

    @property
    def keys(self) -> tuple[str, ...]:
        """Every counter key a rewrite of this family bumps."""
        return tuple(f"{p}_{suffix}" for p in self.prefixes for suffix in ("count", "nodes"))

    @property
    def alias_keys(self) -> tuple[str, ...]:
        """The keys of the names other than torch 2.13's (kept for older readers)."""
        return self.keys[2:]


#: Counted once per lift, without a ``_nodes`` twin and not a pattern match (as in torch).
QUANT_LIFT_UP = "quant_lift_up_count"
#: Inductor's count of every pattern rewrite, of every pass.
GENERIC = ("pattern_matcher_count", "pattern_matcher_nodes")
#: Every key this lowering bumps.
KEYS = frozenset({*(k for family in Family for k in family.keys), QUANT_LIFT_UP, *GENERIC})

#: The one table of keys that are not equal between torch 2.13's x86 passes (torchao 0.18's
#: registered too, as importing its quantizer does) and this lowering alone on the same
#: graph, and why: keys only one side bumps, and keys whose totals include work outside
#: the x86 int8 rewrites. Every other key either side bumps is equal on every graph of
#: tests/test_lowering_counters.py, which reads this table.
ONE_SIDED: dict[str, str] = {
    **dict.fromkeys(
        Family.QCONV_UNARY.alias_keys,
        "ours only: the seed's name for qconv_unary_matcher (torch 2.13 renamed it), "
        "kept as an alias with the same value",
    ),
    QUANT_LIFT_UP: (
        "torch's pre-grad lift-up counts it, but torchao's copy of that pass (installed as "
        "pre_grad_custom_pass when its quantizer module is imported) runs first and lifts "
        "the same quantizes without counting; the test compares it with torch's own "
        "quant_lift_up run on the converted graph instead"
    ),
    **dict.fromkeys(
        GENERIC,
        "Inductor's total over every pattern pass: our rewrites add what torch's would "
        "(bump), but this lowering runs before Inductor's joint-graph patterns "
        "(pointless_view, bmm_to_mm, ...) and consumes float views those match in "
        "torch's flow, so totals differ on graphs with linear layers",
    ),
}


def bump(family: Family, nodes: int, matched: int | None = None) -> None:
    """One rewrite of ``family`` that torch's pattern would match on ``nodes`` nodes.

    ``matched``: how many nodes our own pattern matched when the rewrite is one of our
    pattern passes' (Inductor has counted that match already), None otherwise.
    """
    for prefix in family.prefixes:
        private.count(f"{prefix}_count")
        private.count(f"{prefix}_nodes", nodes)
    count_key, nodes_key = GENERIC
    if matched is None:
        private.count(count_key)
    private.count(nodes_key, nodes - (matched or 0))


def lifted_up() -> None:
    """One quantize lifted above views (torch's pre-grad pass counts each)."""
    private.count(QUANT_LIFT_UP)
