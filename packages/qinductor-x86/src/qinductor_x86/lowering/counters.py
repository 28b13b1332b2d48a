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

from qinductor_x86 import _torch_private as private

#: Family -> every key prefix that means it (torch 2.13's first).
FAMILIES: dict[str, tuple[str, ...]] = {
    "dequant_promotion_matcher": ("dequant_promotion_matcher",),
    "qconv_weight_prepack_matcher": ("qconv_weight_prepack_matcher",),
    "qlinear_weight_prepack_matcher": ("qlinear_weight_prepack_matcher",),
    "qconv_unary_matcher": ("qconv_unary_matcher", "qconv2d_unary_matcher"),
    "qconv2d_binary_matcher": ("qconv2d_binary_matcher",),
    "qlinear_unary_matcher": ("qlinear_unary_matcher",),
    "qlinear_binary_matcher": ("qlinear_binary_matcher",),
    "qmaxpool2d_matcher": ("qmaxpool2d_matcher",),
    "qcat_matcher": ("qcat_matcher",),
    "qreshape_matcher": ("qreshape_matcher",),
    "woq_matcher": ("woq_matcher",),
    "qconv_unary_lower": ("qconv_unary_lower",),
    "qconv2d_binary_lower": ("qconv2d_binary_lower",),
    "qlinear_unary_lower": ("qlinear_unary_lower",),
    "qlinear_binary_lower": ("qlinear_binary_lower",),
}
#: Counted once per lift, without a ``_nodes`` twin and not a pattern match (as in torch).
QUANT_LIFT_UP = "quant_lift_up_count"
#: Inductor's count of every pattern rewrite, of every pass.
GENERIC = ("pattern_matcher_count", "pattern_matcher_nodes")

#: The one table of keys that are not equal between torch 2.13's x86 passes (torchao 0.18's
#: registered too, as importing its quantizer does) and this lowering alone on the same
#: graph, and why: keys only one side bumps, and keys whose totals include work outside
#: the x86 int8 rewrites. Every other key either side bumps is equal on every graph of
#: tests/test_lowering_counters.py, which reads this table.
ONE_SIDED: dict[str, str] = {
    **{
        f"qconv2d_unary_matcher_{suffix}": (
            "ours only: the seed's name for qconv_unary_matcher (torch 2.13 renamed it), "
            "kept as an alias with the same value"
        )
        for suffix in ("count", "nodes")
    },
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


def bump(family: str, nodes: int, matched: int | None = None) -> None:
    """One rewrite of ``family`` that torch's pattern would match on ``nodes`` nodes.

    ``matched``: how many nodes our own pattern matched when the rewrite is one of our
    pattern passes' (Inductor has counted that match already), None otherwise.
    """
    for prefix in FAMILIES[family]:
        private.count(f"{prefix}_count")
        private.count(f"{prefix}_nodes", nodes)
    count_key, nodes_key = GENERIC
    if matched is None:
        private.count(count_key)
    private.count(nodes_key, nodes - (matched or 0))
