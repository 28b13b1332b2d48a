"""The ``avx2-kernels`` tox env: the host-dependent tests again on oneDNN's AVX2 kernels.

On a VNNI or AMX machine, ``ONEDNN_MAX_CPU_ISA=AVX2`` (set by tox) makes oneDNN run its
saturating AVX2 int8 kernels, which no target override can (``qcore.host`` reads the same
cap). On a machine without VNNI the package envs already ran these exact tests on those
kernels, so running them again would only repeat them: the env says so and passes. The
packages are installed here, only when the tests run, so that such a machine does not pay
for installing torch into an env it does not use. The CPU is read from ``/proc/cpuinfo``
(the kernels' own view, whatever oneDNN is capped to).

    python .ci/avx2_kernels.py [PYTEST ARGS ...]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["packages/qcore", "packages/qbackend-onednn", "packages/qquantizer-xnnpack",
            "packages/qinductor-x86"]  # fmt: skip

TESTS = [
    "packages/qcore/tests/test_saturation.py",
    "packages/qcore/tests/test_pt2e_ranges.py",
    "packages/qbackend-onednn/tests/test_host_numerics.py",
    "packages/qbackend-onednn/tests/test_fx_native.py",
    "packages/qinductor-x86/tests/test_lowering_models.py",
    "packages/qinductor-x86/tests/test_lowering_saturation.py",
    "packages/qinductor-x86/tests/test_builtin_lowering.py",
    "packages/qinductor-x86/tests/test_transposed_weights.py",
    "tests/test_transformers_compiled.py",
]
#: What the tests above need besides the packages (versions from constraints.txt).
EXTRA = ["transformers"]


def cpu_has_exact_int8() -> bool:
    """VNNI or AMX on this CPU (Linux's flags; elsewhere, assume so and run the tests)."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return True
    return any(flag in flags for flag in ("avx512_vnni", "avx_vnni", "amx_int8"))


def main(args: list[str]) -> int:
    if not cpu_has_exact_int8():
        print("avx2-kernels: this CPU has no VNNI, so the package envs already ran these tests "
              "on oneDNN's saturating AVX2 kernels; not repeating them")
        return 0
    editable = [arg for package in PACKAGES for arg in ("-e", str(ROOT / package))]
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", *editable, *EXTRA], check=True)
    os.chdir(ROOT)
    return subprocess.run([sys.executable, "-m", "pytest", *args, *TESTS], check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
