"""The XNNPACK namespace reuses qcore's common annotators rather than copying them."""

from __future__ import annotations


def test_common_namespace_is_shared_with_xnnpack() -> None:
    from qcore.pt2e.annotation.registry import ANNOTATORS

    common = {a.name: a for a in ANNOTATORS.annotators("common")}
    import qquantizer_xnnpack.annotators  # noqa: F401  (registers "xnnpack")

    xnnpack = {a.name: a for a in ANNOTATORS.annotators("xnnpack")}
    assert xnnpack["linear"] is common["linear"]  # the same object serves both
    assert xnnpack["conv"] is not common["conv"]  # XNNPACK adds its conv limits
    assert xnnpack["gru_io_only"].opt_in and xnnpack["max_pool2d"].opt_in
    assert {n for n, a in xnnpack.items() if a.dynamic} == {"linear", "conv", "conv_transpose"}
