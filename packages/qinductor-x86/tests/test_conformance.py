"""The x86 quantizer passes qcore's conformance kit, loaded through its entry point, for a
target that saturates (AVX2 without VNNI) and one that does not: the verdict must not
depend on the CPU the kit runs on."""

import pytest

import qcore.host
import qcore.testing
from qcore.pt2e.annotation.registry import ANNOTATORS
from qinductor_x86.quantizer.annotators import SATURATING_TARGET


@pytest.mark.parametrize("target", ["avx2", "avx512_vnni"])
def test_x86_is_conformant(target: str) -> None:
    with qcore.host.targeting(target):
        results = qcore.testing.assert_conformant("quantizer", "x86")
    checked = {r.subject for r in results if r.check == "prepare-convert"}
    assert checked == {a.name for a in ANNOTATORS.annotators("x86")}
    # matmul_int8 declines on a saturating target, saying why, and is checked for another
    (matmul_int8,) = [r for r in results if r.check == "annotator" and r.subject == "matmul_int8"]
    if target == "avx2":
        assert matmul_int8.detail.startswith(f"declines on target avx2 ({SATURATING_TARGET}); checked for target ")
    else:
        assert matmul_int8.detail == ""
