"""The qcore command, in process, against fake distributions."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from qcore.cli import main

from .test_plugins import GOOD_BACKEND

FakeDist = Callable[..., Path]


def test_list_shows_broken_plugins_with_their_reason(
    fake_dist: FakeDist, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_dist("qbackend-broken", {"qcore.backends": {"broken": "qbroken_cli.plugin:PLUGIN"}})
    assert main(["check", "broken"]) == 1
    assert "qbackend-broken" in capsys.readouterr().out
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if " broken " in line)
    assert row.split() == ["backend", "broken", "qbackend-broken", "1.0", "error", "[1]"]
    note = out[out.index("\n[1] ") :]  # the reason, under the table
    assert "qbackend-broken" in note and "qbroken_cli" in note


def test_check_passes_a_good_backend_and_fails_a_bad_one(
    fake_dist: FakeDist, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = GOOD_BACKEND.replace('"tiny"', '"bad"').replace(
        "BackendPatternConfig(torch.nn.ReLU)",
        "BackendPatternConfig((torch.nn.Linear, torch.nn.ReLU))"
        ".set_fuser_method(lambda is_qat, a, b: torch.nn.Identity())"
        ".set_fused_module(torch.ao.nn.intrinsic.LinearReLU)",
    )
    fake_dist(
        "qbackend-tiny",
        {"qcore.backends": {"tiny": "qtiny_cli.plugin:PLUGIN"}},
        {"qtiny_cli.plugin": GOOD_BACKEND},
    )
    fake_dist(
        "qbackend-bad",
        {"qcore.backends": {"bad": "qbad_cli.plugin:PLUGIN"}},
        {"qbad_cli.plugin": bad},
    )
    assert main(["check", "tiny"]) == 0
    assert "backend:tiny:" in capsys.readouterr().out
    assert main(["check", "bad"]) == 1
    out = capsys.readouterr().out
    assert "FAIL backend:bad fuser-method" in out


def test_unknown_name_exits_non_zero_with_one_line_and_a_hint(
    fake_dist: FakeDist, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_dist("qbackend-tiny", {"qcore.backends": {"tiny": "qtiny_cli2.plugin:PLUGIN"}})
    assert main(["show", "mychip"]) == 2
    error, hint = capsys.readouterr().err.strip().split("\n")
    assert error.startswith("qcore: error: ") and "mychip" in error and "tiny" in error
    assert hint == "hint: 'qcore list' shows the installed plugins and their names"
    assert main(["check", "mychip"]) == 2


def test_show_reports_a_broken_kind_and_still_shows_the_others(
    fake_dist: FakeDist, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_dist(
        "qchip",
        {
            "qcore.backends": {"chip": "qchip_show.plugin:PLUGIN"},
            "qcore.lowerings": {"chip": "qchip_show_missing.plugin:LOWERING"},
        },
        {"qchip_show.plugin": GOOD_BACKEND.replace('"tiny"', '"chip"')},
    )
    assert main(["show", "chip"]) == 1
    out = capsys.readouterr().out
    assert "backend chip (qchip 1.0): 1 patterns" in out
    assert "lowering chip: error:" in out and "qchip_show_missing" in out


def test_host_names_this_cpu_and_a_different_target(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from qcore import host

    monkeypatch.delenv(host.ENV_TARGET, raising=False)
    assert main(["host"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"this CPU: {host.probe().isa}\n")
    assert "target" not in out
    monkeypatch.setenv(host.ENV_TARGET, "amx" if host.probe().isa != "amx" else "avx2")
    assert main(["host"]) == 0
    out = capsys.readouterr().out
    assert f"target ({host.ENV_TARGET}): " in out
    assert all(len(line) <= 80 for line in out.splitlines())
