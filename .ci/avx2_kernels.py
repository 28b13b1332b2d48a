"""The ``avx2-kernels`` tox env: the host-dependent tests again on oneDNN's AVX2 kernels.

On a VNNI or AMX machine, ``ONEDNN_MAX_CPU_ISA=AVX2`` (set by tox) makes oneDNN run its
saturating AVX2 int8 kernels, which no target override can (``qcore.host`` reads the same
cap). On a machine without VNNI the package envs already ran these exact tests on those
kernels, so running them again would only repeat them: every one of them is reported as
skipped, with that reason, in the env's report (never a silent pass). The wheels of
``QPACKAGES`` (tox.ini) are installed here, by ``wheels.py``; ``QTESTS`` lists the tests. The CPU is read from
``/proc/cpuinfo`` (the kernels' own view, whatever oneDNN is capped to).

    python .ci/avx2_kernels.py [PYTEST ARGS ...]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import repo
import wheels

HERE = Path(__file__).resolve().parent

#: The reason every test gets on a CPU without VNNI (``skip_all.py`` reads it).
SKIP_REASON_ENV = "QCORE_SKIP_ALL_REASON"
NO_VNNI = (
    "this CPU has no VNNI: the package envs already ran this test on oneDNN's saturating "
    "AVX2 kernels"
)

def cpu_has_exact_int8() -> bool:
    """VNNI or AMX on this CPU (Linux's flags; elsewhere, assume so and run the tests)."""
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return True
    return any(flag in flags for flag in ("avx512_vnni", "avx_vnni", "amx_int8"))


def main(args: list[str]) -> int:
    wheels.install(os.environ["QPACKAGES"].split())
    env = dict(os.environ)
    if not cpu_has_exact_int8():
        print(f"avx2-kernels: {NO_VNNI}; reporting each one as skipped")
        env[SKIP_REASON_ENV] = NO_VNNI
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
        args = ["-p", "skip_all", *args]
    command = [sys.executable, "-m", "pytest", *args, *os.environ["QTESTS"].split()]
    return subprocess.run(command, cwd=repo.ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
