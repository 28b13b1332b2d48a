"""torch's counters for its x86 int8 passes, incremented here with the same meaning.

Each pattern family has a ``<name>_count`` (one per rewrite) and a ``<name>_nodes`` (the
graph nodes that rewrite replaced) in ``torch._dynamo.utils.counters["inductor"]``. Tests
and tooling written against torch's passes read them, so this lowering bumps the same keys.
torch 2.13 renamed the seed's ``qconv2d_unary_matcher`` to ``qconv_unary_matcher``: both
are bumped, so that code written against either keeps working.
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
#: Counted once per lift, without a ``_nodes`` twin (as in torch).
QUANT_LIFT_UP = "quant_lift_up_count"


def bump(family: str, nodes: int) -> None:
    """One rewrite of ``family`` that replaced ``nodes`` graph nodes."""
    for prefix in FAMILIES[family]:
        private.count(f"{prefix}_count")
        private.count(f"{prefix}_nodes", nodes)


def all_keys() -> list[str]:
    """Every counter key this lowering may increment."""
    keys = [f"{p}_{s}" for prefixes in FAMILIES.values() for p in prefixes for s in ("count", "nodes")]
    return [*keys, QUANT_LIFT_UP]
