"""The x86 quantizer passes qcore's conformance kit, loaded through its entry point."""

import qcore.testing
from qcore.pt2e.annotation.registry import ANNOTATORS


def test_x86_is_conformant() -> None:
    results = qcore.testing.assert_conformant("quantizer", "x86")
    checked = {r.subject for r in results if r.check == "prepare-convert"}
    assert checked == {a.name for a in ANNOTATORS.annotators("x86")}
