"""torchao 0.18's x86 int8 fusion suite, as written, against upstream's x86 passes (torch's
own copy on torch 2.13, torchao 0.18's from 2.14, where torch dropped its copy) and
against this repository's lowering, on both routes: this CPU (VNNI or AMX) and a CPU
without VNNI (oneDNN capped at AVX2, as the avx2-kernels env does).

The suite is upstream's ``test/quantization/pt2e/test_x86inductor_fusion.py`` at torchao's
tag ``v0.18.0``, which no package installs: pass its path (a checkout of that tag). This
script fetches nothing; it checks the file is that tag's (its git blob id) and that the
installed torch and torchao are the releases the lowering is written for. Each (route,
side) runs in a fresh pytest process with ``upstream_fusion_plugin.py`` (which side's
passes the compiles run, see there), its own Inductor cache and one OpenMP thread, two
processes at a time. It prints, per route, the counts per side and every test that passes
with torch's passes but not with ours, and exits non-zero if there is one.

    python .ci/upstream_fusion.py PATH/test_x86inductor_fusion.py \\
        [--routes vnni avx2] [--sides torch ours] [--out DIR] [-k EXPR]

Long (the suite compiles a few hundred graphs per side and route): not part of the tox
matrix; the numbers it printed last are in packages/qinductor-x86/README.md.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import itertools
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
SUITE_TAG = "v0.18.0"
SUITE_PATH = "test/quantization/pt2e/test_x86inductor_fusion.py"
#: ``git rev-parse v0.18.0:test/quantization/pt2e/test_x86inductor_fusion.py`` in torchao
SUITE_BLOB = "afa48d0e8bc8716811598e4fc8c922cc8618efd1"
VERSIONS = {"torch": ("2.13.", "2.14.", "2.15."), "torchao": ("0.18.0",)}
SIDES = ("torch", "ours", "torchao")
ROUTES = ("vnni", "avx2")
#: what makes this process a CPU without VNNI for oneDNN, qcore.int8.cpu_profile and Inductor
AVX2_ENV = {"ONEDNN_MAX_CPU_ISA": "AVX2", "ATEN_CPU_CAPABILITY": "avx2"}


def git_blob_id(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def check_inputs(suite: Path) -> None:
    blob = git_blob_id(suite)
    if blob != SUITE_BLOB:
        sys.exit(f"{suite}: not torchao {SUITE_TAG}'s {SUITE_PATH} (blob {blob})")
    for name, prefixes in VERSIONS.items():
        version = importlib.metadata.version(name)
        if not version.startswith(prefixes):
            sys.exit(f"{name} {version} installed; this run is for {' or '.join(prefixes)}*")


def upstream_side() -> str:
    """The anchor: torch's own copy of the passes where this torch carries one (2.13),
    torchao 0.18's where torch dropped it (2.14 on)."""
    from qinductor_x86.lowering import torch_carries_x86_passes

    return "torch" if torch_carries_x86_passes() else "torchao"


def run(suite: Path, route: str, side: str, *, out: Path, cache: Path, extra: list[str]) -> Path:
    """One pytest process over the whole suite; its JUnit report."""
    report = out / f"{route}-{side}.xml"
    env = {k: v for k, v in os.environ.items() if k not in AVX2_ENV}
    if route == "avx2":
        env.update(AVX2_ENV)
    env.update(
        QCORE_UPSTREAM_SIDE=side,
        QCORE_UPSTREAM_ROUTE=route,
        QCORE_UPSTREAM_PROGRESS=str(out / f"{route}-{side}.progress"),
        OMP_NUM_THREADS="1",
        PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")])),
    )
    # no compiled graph is served from a cache (each side compiles every graph itself);
    # the C++ kernels, keyed by their source, are shared by the sides of a route
    env.update(
        TORCHINDUCTOR_CACHE_DIR=str(cache / route),
        TORCHINDUCTOR_FX_GRAPH_CACHE="0",
        TORCHINDUCTOR_AUTOGRAD_CACHE="0",
    )
    command = [
        sys.executable, "-m", "pytest", str(suite), "-p", "upstream_fusion_plugin",
        "-p", "no:cacheprovider", "-c", os.devnull, "--rootdir", str(suite.parent),
        "-q", "-rN", f"--junitxml={report}", *extra,
    ]  # fmt: skip
    (out / f"{route}-{side}.progress").unlink(missing_ok=True)
    with open(out / f"{route}-{side}.log", "w") as log:
        subprocess.run(
            command, cwd=suite.parent, env=env, stdout=log, stderr=subprocess.STDOUT, check=False
        )
    return report


def outcomes(report: Path) -> dict[str, str]:
    """Test id -> passed / failed / skipped, from a JUnit report."""
    if not report.exists():
        sys.exit(f"{report}: missing (see the .log beside it)")
    result = {}
    for case in ET.parse(report).iter("testcase"):
        name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
        kinds = {child.tag for child in case}
        result[name] = (
            "failed"
            if kinds & {"failure", "error"}
            else "skipped"
            if "skipped" in kinds
            else "passed"
        )
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", type=Path, help=f"torchao {SUITE_TAG}'s {SUITE_PATH}")
    parser.add_argument("--routes", nargs="+", choices=ROUTES, default=list(ROUTES))
    parser.add_argument("--sides", nargs="+", choices=SIDES, default=None,
                        help="default: upstream's copy for this torch (torch's or torchao's), ours")
    parser.add_argument("--out", type=Path, default=Path("upstream-fusion"))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("-k", help="pytest -k expression (default: the whole suite)")
    args = parser.parse_args(argv)
    suite = args.suite.resolve()
    check_inputs(suite)
    args.sides = args.sides or [upstream_side(), "ours"]
    anchor = args.sides[0]
    args.out.mkdir(parents=True, exist_ok=True)
    extra = ["-k", args.k] if args.k else []
    runs = list(itertools.product(args.routes, args.sides))
    with (
        tempfile.TemporaryDirectory(prefix="upstream-fusion-") as cache,
        ThreadPoolExecutor(args.jobs) as pool,
    ):
        done = pool.map(
            lambda r: run(suite, *r, out=args.out.resolve(), cache=Path(cache), extra=extra), runs
        )
        reports = dict(zip(runs, done, strict=True))
    summary: dict[str, dict[str, object]] = {}
    missing_any = False
    for route in args.routes:
        results = {side: outcomes(reports[route, side]) for side in args.sides}
        counts = {
            side: {
                kind: sum(v == kind for v in got.values())
                for kind in ("passed", "failed", "skipped")
            }
            for side, got in results.items()
        }
        summary[route] = {"counts": counts}
        print(f"route {route}:")
        for side, count in counts.items():
            print(
                f"  {side:8} {count['passed']} passed, {count['failed']} failed, {count['skipped']} skipped"
            )
        if anchor != "ours" and "ours" in args.sides:
            lost = sorted(
                name for name, kind in results[anchor].items()
                if kind == "passed" and results["ours"].get(name) != "passed"
            )  # fmt: skip
            gained = sorted(
                name for name, kind in results["ours"].items()
                if kind == "passed" and results[anchor].get(name) != "passed"
            )  # fmt: skip
            summary[route] |= {f"{anchor} only": lost, "ours only": gained}
            print(f"  passing with {anchor}'s passes but not ours: {len(lost)}")
            for name in lost:
                print(f"    {name}")
            print(f"  passing with ours but not {anchor}'s: {len(gained)}")
            for name in gained:
                print(f"    {name}")
            missing_any = missing_any or bool(lost)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return 1 if missing_any else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
