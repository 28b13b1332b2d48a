"""The code Inductor generates under this lowering is the code torch's own x86 passes
generate for the same graph, as upstream's fusion tests read it.

torchao 0.18's x86 fusion suite counts oneDNN op names anywhere in the generated code
(``source_code.count("torch.ops.onednn.qlinear_pointwise.binary")``). Inductor names the
FX target of each extern kernel in the code's ``assert_size_stride`` checks, so a kernel
lowered as a plain op call (not through a lowering pattern, as torch lowers its own) has
its name in two more lines per call, and those counts come out two or three times torch's.
The in-place "sum" torch picks for a float-output linear + add + relu is compared too.

One compile per side, each in a fresh interpreter (``codegen_probe.py``): torch's passes
(and torchao's) on one side, this lowering alone on the other, the same converted graph.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import lowering_zoo as zoo


def test_generated_code_names_and_calls_kernels_as_torchs_passes() -> None:
    with ThreadPoolExecutor(2) as pool:
        runs = {side: pool.submit(zoo.run_script, "codegen_probe.py", side) for side in ("torch", "ours")}
        theirs, ours = (runs[side].result() for side in ("torch", "ours"))
    assert not any(ours.pop("other passes").values())
    assert theirs.pop("other passes")["torch lowerings"]
    assert len(theirs["calls"]) == 4, theirs  # the reference lowered every linear
    assert ours == theirs
