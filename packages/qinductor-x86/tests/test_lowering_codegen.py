"""The code Inductor generates under this lowering is the code torch's own x86 passes
generate for the same graph, as upstream's fusion tests read it; and the int8 matmul
family is exact.

torchao 0.18's x86 fusion suite counts oneDNN op names anywhere in the generated code
(``source_code.count("torch.ops.onednn.qlinear_pointwise.binary")``). Inductor names the
FX target of each extern kernel in the code's ``assert_size_stride`` checks, so a kernel
lowered as a plain op call (not through a lowering handler, as torch's lowering patterns
hand their kernels to Inductor) has its name in two more lines per call, and those counts
come out two or three times torch's. The in-place "sum" torch picks for a float-output
linear + add + relu is compared too, and so are torchao's int8 matmul spellings (dynamic
int8 / SmoothQuant ``_int_mm``), which this lowering must lower to the same kernels, and
compute exactly where eager ``_int_mm`` saturates (a CPU without VNNI).

One compile of each graph per side (``codegen_probe.py``), each side in the fresh
interpreter of its lowering mode (``probe_modes.py``): torch's passes (and torchao's) in
mode ``reference``, this lowering alone in mode ``standalone``.
"""

from __future__ import annotations

from typing import Any

#: float32 rounding of the scales' products
EXACT = 1e-6

PROBED = (("reference", "codegen"), ("standalone", "codegen"))


def test_generated_code_names_and_calls_kernels_as_torchs_passes(probes: Any) -> None:
    theirs, ours = probes.result("reference", "codegen"), probes.result("standalone", "codegen")
    assert not any(ours["_other_passes"].values())
    assert theirs["_other_passes"]["torch lowerings"]
    # the reference lowered every linear and both matmuls
    assert [len(theirs[graph]["calls"]) for graph in ("linear + add", "int8 matmul")] == [4, 2]
    for graph in ("linear + add", "int8 matmul"):
        assert ours[graph] == theirs[graph], graph
    assert max(ours["int8 matmul, relative distance to exact"]) < EXACT
    # full-range weights: on a target that saturates, both matmuls take the doubled route
    assert ours["int8 matmul, doubled"] == (2 if ours["target saturates"] else 0)
