"""The public API and CLI as a user meets them: fresh interpreters, installed metadata."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from typing import Any

import pytest

from qcore.testing.fresh import run_fresh

FIRST_PARTY = {
    ("backend", "onednn", "qbackend-onednn"),
    ("backend", "executorch", "qbackend-executorch"),
    ("quantizer", "xnnpack", "qquantizer-xnnpack"),
    ("quantizer", "x86", "qinductor-x86"),
    ("lowering", "x86", "qinductor-x86"),
}
HEAVY_PREFIXES = ("qbackend_", "qquantizer_", "qinductor_", "torchao", "torch._inductor")


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}  # tox sets the terminal's
    return subprocess.run(
        [sys.executable, "-m", "qcore.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_list_plugins_names_first_party_without_importing_them() -> None:
    result = run_python(
        "import json, sys, qcore\n"
        "rows = [(p.kind, p.name, p.distribution, p.status) for p in qcore.list_plugins()]\n"
        f"heavy = sorted(m for m in sys.modules if m.startswith({HEAVY_PREFIXES!r}))\n"
        "print(json.dumps({'rows': rows, 'heavy': heavy}))"
    )
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    listed = {(k, n, d) for k, n, d, _ in payload["rows"]}
    assert listed >= FIRST_PARTY
    assert all(status == "available" for *_, status in payload["rows"])
    assert payload["heavy"] == []


def test_cli_list_prints_every_first_party_plugin() -> None:
    result = run_cli("list")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["KIND", "NAME", "DISTRIBUTION", "VERSION", "STATUS"]
    rows = {tuple(line.split()[:3]) for line in lines[1:]}
    assert rows >= FIRST_PARTY
    assert "Failed to load" not in result.stdout + result.stderr


@pytest.mark.parametrize("dist", ["qcore-torch", "qbackend-onednn", "qbackend-executorch"])
def test_fx_packages_do_not_require_torchao(dist: str) -> None:
    """A plain install stays lean; an extra (``qcore-torch[pt2e]``) brings torchao."""
    requirements = metadata.requires(dist) or []
    assert requirements, f"{dist} declares no requirements at all"
    plain = [r for r in requirements if "extra ==" not in r]
    assert plain, f"{dist} has no plain requirements"
    assert not [r for r in plain if "torchao" in r.lower()]


@pytest.mark.parametrize(
    ("backend", "count"),
    [("onednn", 221), ("executorch", 84)],
)
def test_backend_config_builds_in_a_fresh_interpreter(
    fresh_lookup: Callable[[str], dict[str, Any]], backend: str, count: int
) -> None:
    # torch 2.13's own onednn getter fails in a fresh process; ours must not.
    assert fresh_lookup(backend)["patterns"] >= count  # installed extensions may add patterns


def test_unknown_name_is_a_one_line_error_listing_known_names_and_a_hint() -> None:
    result = run_cli("show", "nosuchbackend")
    assert result.returncode != 0
    message, hint = result.stderr.strip().split("\n")
    assert "nosuchbackend" in message
    for known in ("onednn", "executorch", "xnnpack"):
        assert known in message
    assert hint.startswith("hint: 'qcore list'")


def test_show_onednn_prints_one_row_per_pattern() -> None:
    import qcore

    result = run_cli("show", "onednn")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    expected = len(qcore.get_backend_config("onednn").configs)
    assert (
        lines[0].startswith("backend onednn (qbackend-onednn")
        and f"{expected} patterns" in lines[0]
    )
    assert lines[1].split() == ["PATTERN", "OUTPUT", "DTYPES", "MODULE"]
    assert max(map(len, lines)) <= 80  # output to a pipe is fitted to 80 columns
    rows = [line for line in lines[2:] if not line[0].isspace()]  # continuations are indented
    assert len(rows) == expected
    assert any(line.startswith("ReLU(torch.add(") for line in rows)


def test_distributed_names_are_the_designs_and_need_no_torchao() -> None:
    """DESIGN's ``qcore.distributed.sync_observers(prepared, group=None)`` and
    ``calibrate(prepared, batches, group=None)``, reached as attributes of ``qcore``, work
    for an FX user without torchao (blocked here), in a world of one."""
    source = """
import inspect, sys
sys.modules["torchao"] = None  # as if not installed
import torch, qcore
sync, calibrate = qcore.distributed.sync_observers, qcore.distributed.calibrate
assert list(inspect.signature(sync).parameters) == ["prepared", "group"]
assert list(inspect.signature(calibrate).parameters)[:3] == ["prepared", "batches", "group"]
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
prepared = qcore.fx.prepare(model, "onednn", torch.randn(1, 3, 8, 8))
summary = calibrate(prepared, [torch.randn(1, 3, 8, 8)], progress=False)
import qcore.testing.fresh as fresh
fresh.emit([summary.world_size, summary.observers, "torchao" in str(sys.modules.get("torchao"))])
"""
    outcome = run_fresh(source, timeout=120)
    assert outcome.ok, outcome.describe()
    world, observers, _ = outcome.result()
    assert world == 1 and observers >= 2
