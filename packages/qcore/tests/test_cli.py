"""The qcore command, in process, against fake distributions."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from qcore.cli import main
from qcore.zoo.suite.fakes import one_plugin

from .test_plugins import GOOD_BACKEND

FakeDist = Callable[..., Path]


def test_list_shows_broken_plugins_with_their_reason(
    fake_dist: FakeDist, capsys: pytest.CaptureFixture[str]
) -> None:
    one_plugin(fake_dist, "qbackend-broken", "broken", "qbroken_cli.plugin")
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
    one_plugin(fake_dist, "qbackend-tiny", "tiny", "qtiny_cli.plugin", GOOD_BACKEND)
    one_plugin(fake_dist, "qbackend-bad", "bad", "qbad_cli.plugin", bad)
    assert main(["check", "tiny"]) == 0
    assert "backend:tiny:" in capsys.readouterr().out
    assert main(["check", "bad"]) == 1
    out = capsys.readouterr().out
    assert "FAIL backend:bad fuser-method" in out


def test_unknown_name_exits_non_zero_with_one_line_and_a_hint(
    fake_dist: FakeDist, capsys: pytest.CaptureFixture[str]
) -> None:
    one_plugin(fake_dist, "qbackend-tiny", "tiny", "qtiny_cli2.plugin")
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


# A backend whose rows are as wide as oneDNN's: nested fusions, several dtype configs.
WIDE_BACKEND = """
from qcore.plugin_api import BackendPlugin

def _config():
    import operator, torch
    import torch.ao.nn.intrinsic as nni
    from torch import nn
    from qcore.fx import dtypes
    from qcore.fx.patterns import BinaryRoot, assemble, binary_op_configs, conv_configs, fusion
    from qcore.fx.patterns import linear_configs
    W = [dtypes.WEIGHTED_INT8, dtypes.DYNAMIC_INT8, dtypes.DYNAMIC_FP16]
    add_relu = BinaryRoot(operator.add, nn.Conv2d, "left", bn=nn.BatchNorm2d, post=nn.ReLU)
    return assemble(
        "wide",
        conv_configs([dtypes.WEIGHTED_INT8], dims=(1,)),
        linear_configs(W),
        [fusion(add_relu, [dtypes.WEIGHTED_INT8], into=nni.ConvAddReLU2d)],
        binary_op_configs((operator.add, torch.add), [dtypes.OP_QUINT8]),
    )

PLUGIN = BackendPlugin(name="wide", backend_config=_config)
"""

# A quantizer whose annotators have long names and descriptions, one of them added by an
# extension distribution.
WORDY_QUANTIZER = """
from qcore.pt2e.annotation.registry_quantizer import RegistryQuantizer
from qcore.pt2e.annotation.registry import ANNOTATORS, Annotator

def _nothing(gm, config, filter_fn):
    return []

ANNOTATORS.define(
    "wordy",
    [
        Annotator(
            f"conv2d_batch_norm_add_relu_{i}",
            _nothing,
            dynamic=True,
            description="conv2d -> batch_norm -> add (either side; the other input stays "
            "float) -> relu, in training graphs before batch-norm folding",
        )
        for i in range(3)
    ],
    source="qquantizer-wordy 1.0",
)

class Wordy(RegistryQuantizer):
    namespace = "wordy"

def make():
    return Wordy()
"""
WORDY_PLUGIN = """
from qcore.plugin_api import QuantizerExtension, QuantizerPlugin
from qcore.pt2e.annotation.registry import Annotator

PLUGIN = QuantizerPlugin(name="wordy", factory="qwordy_cli.quantizer:make", annotator_namespace="wordy")

def _nothing(gm, config, filter_fn):
    return []

def _extra():
    return [Annotator("lut_silu", _nothing, description="silu through the chip's LUT")]

EXTENSION = QuantizerExtension(name="chip", target="wordy", annotators=_extra)
"""


def _lines_of(main_args: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(main_args) == 0
    return capsys.readouterr().out.rstrip("\n").splitlines()


def _rows(lines: list[str]) -> list[str]:
    """Lines that start a row: wrapped continuations are indented."""
    return [line for line in lines if line and not line[0].isspace()]


def _column(table: list[str], header: str) -> list[str]:
    """Each row's cell under ``header``, its wrapped pieces joined back together."""
    start = table[0].index(header)
    later = [table[0].index(h) for h in table[0].split() if table[0].index(h) > start]
    end = min(later, default=None)
    cells: list[str] = []
    for line in table[1:]:
        piece = line[start:end].strip()
        if line[:1].isspace() and cells:  # a continuation line
            glue = "" if cells[-1].endswith("-") else " "
            cells[-1] = f"{cells[-1]}{glue}{piece}".strip()
        else:
            cells.append(piece)
    return cells


def test_show_tables_fit_80_columns_one_row_per_pattern(
    fake_dist: FakeDist, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    one_plugin(fake_dist, "qbackend-wide-and-long-name", "wide", "qwide_cli.plugin", WIDE_BACKEND)
    import qcore

    patterns = len(qcore.get_backend_config("wide").configs)
    monkeypatch.setenv("COLUMNS", "200")
    wide = _lines_of(["show", "wide"], capsys)
    assert len(wide) == 2 + patterns  # room enough: one line per pattern, as before
    assert max(map(len, wide)) > 80  # so the narrow run below has something to wrap

    monkeypatch.setenv("COLUMNS", "80")
    narrow = _lines_of(["show", "wide"], capsys)
    assert max(map(len, narrow)) <= 80
    assert narrow[1].split() == ["PATTERN", "OUTPUT", "DTYPES", "MODULE"]
    assert len(_rows(narrow)) == 2 + patterns
    # wrapping loses nothing: the narrow table holds the same characters as the wide one
    assert sorted("".join(narrow).replace(" ", "")) == sorted("".join(wide).replace(" ", ""))
    assert any(row.startswith("ReLU(operator.add(") for row in _rows(narrow))


def test_show_quantizer_fits_80_columns_and_names_extension_sources(
    fake_dist: FakeDist, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_dist(
        "qquantizer-wordy",
        {"qcore.quantizers": {"wordy": "qwordy_cli.plugin:PLUGIN"}},
        {"qwordy_cli.plugin": WORDY_PLUGIN, "qwordy_cli.quantizer": WORDY_QUANTIZER},
    )
    fake_dist(
        "qchip-extras",
        {"qcore.quantizer_extensions": {"wordy.chip": "qwordy_cli.plugin:EXTENSION"}},
    )
    monkeypatch.setenv("COLUMNS", "80")
    lines = _lines_of(["show", "wordy"], capsys)
    assert max(map(len, lines)) <= 80
    assert lines[0] == "quantizer wordy (qquantizer-wordy 1.0): 4 annotators"
    assert lines[1].split() == ["ANNOTATOR", "MODES", "DESCRIPTION"]
    rows = _rows(lines)[2:]
    assert [r.split()[:3] for r in rows[:3]] == [
        [f"conv2d_batch_norm_add_relu_{i}", "static", "dynamic"] for i in range(3)
    ]
    text = " ".join(" ".join(lines).split())
    assert "in training graphs before batch-norm folding" in text
    assert "silu through the chip's LUT; added by qchip-extras 1.0" in text


def test_list_fits_80_columns_with_reasons_as_notes(
    fake_dist: FakeDist, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    one_plugin(
        fake_dist,
        "qbackend-a-distribution-with-a-long-name",
        "chip",
        "qchip_list_missing.deeply.nested.plugin",
    )
    one_plugin(fake_dist, "qbackend-copy-a", "twin", "qtwin_list_a")
    one_plugin(fake_dist, "qbackend-copy-b", "twin", "qtwin_list_b")
    import qcore
    from qcore.errors import PluginError

    with pytest.raises(PluginError):
        qcore.get_backend_config("chip")
    monkeypatch.setenv("COLUMNS", "80")
    lines = _lines_of(["list"], capsys)
    assert max(map(len, lines)) <= 80
    assert lines[0].split() == ["KIND", "NAME", "DISTRIBUTION", "VERSION", "STATUS"]
    table = lines[: lines.index("")]
    columns = zip(*(_column(table, h) for h in ("NAME", "DISTRIBUTION", "STATUS")), strict=True)
    # (quantizers derived from installed backends share a note of their own)
    statuses = {
        (name, dist): status
        for name, dist, status in columns
        if "[" in status and not status.startswith("derived")
    }
    assert statuses == {
        ("chip", "qbackend-a-distribution-with-a-long-name"): "error [1]",
        ("twin", "qbackend-copy-a"): "conflict [2]",  # both claimants share one note
        ("twin", "qbackend-copy-b"): "conflict [2]",
    }
    notes = "\n".join(lines[lines.index("") + 1 :])
    assert notes.startswith("[1] ") and "\n[2] " in notes
    assert "qchip_list_missing" in notes and "ModuleNotFoundError" in notes
    assert "qbackend-copy-a" in notes.split("[2]")[1]


def test_an_unexpected_error_is_one_line_and_a_hint(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from qcore.cli import describe

    def broken(name: str) -> str:
        try:
            raise ImportError("libopenblas.so: cannot open shared object file")
        except ImportError as exc:
            raise RuntimeError("\nIMPORTANT: PLEASE READ THIS\n\nmany lines of advice") from exc

    monkeypatch.setitem(describe.DESCRIBERS, "lowering", broken)
    monkeypatch.setattr("qcore.cli._resolve", lambda spec, *_: [("lowering", spec)])
    assert main(["show", "anything"]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines() == [
        "qcore: error: RuntimeError: IMPORTANT: PLEASE READ THIS (caused by ImportError: "
        "libopenblas.so: cannot open shared object file)",
        "hint: rerun with --debug for the traceback; if the error persists, report it with "
        "that output",
    ]
    with pytest.raises(RuntimeError, match="IMPORTANT"):
        main(["--debug", "show", "anything"])
    with pytest.raises(RuntimeError, match="IMPORTANT"):
        main(["show", "anything", "--debug"])  # after the command too


def test_debug_prints_the_traceback_of_a_broken_plugin(
    fake_dist: FakeDist, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without ``--debug`` a broken plugin, a bad flag and an unknown name are reported
    without a traceback (in process); with it, as the ``qcore`` command runs, the
    interpreter prints the traceback of what went wrong (its own process)."""
    root = one_plugin(fake_dist, "qbackend-broken", "broken", "qbroken_debug.plugin")

    assert main(["show", "broken"]) == 1  # the show table reports the broken kind
    assert main(["check", "broken"]) == 1
    with pytest.raises(SystemExit) as usage:
        main(["show", "broken", "--nosuchflag"])
    assert usage.value.code == 2  # argparse's usage error
    captured = capsys.readouterr()
    assert "Traceback" not in captured.out + captured.err
    assert main(["show", "nosuch"]) == 2
    unknown = capsys.readouterr()
    assert len(unknown.err.splitlines()) == 2 and "Traceback" not in unknown.out + unknown.err

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *sys.path])}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "qcore.cli", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )

    debug = run("--debug", "show", "broken")
    assert debug.returncode == 1
    assert "Traceback (most recent call last)" in debug.stderr
    assert "ModuleNotFoundError: No module named 'qbroken_debug'" in debug.stderr
    unknown = run("show", "nosuch", "--debug")
    assert "Traceback" in unknown.stderr and "PluginNotFoundError" in unknown.stderr


def _run_cli(*args: str, root: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m qcore.cli`` (the console script's ``main``), seeing fake distributions
    under ``root``."""
    env = dict(os.environ)
    if root is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(root), *sys.path])
    return subprocess.run(
        [sys.executable, "-m", "qcore.cli", *args],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip


def test_version_names_the_distribution_and_the_plugin_api() -> None:
    from importlib import metadata

    import qcore

    run = _run_cli("--version")
    assert (run.returncode, run.stderr) == (0, "")
    installed = metadata.version("qcore-torch")
    assert installed == qcore.__version__  # the distribution this code is installed as
    assert run.stdout == f"qcore-torch {installed} (plugin API {qcore.PLUGIN_API_VERSION})\n"


KIND_HINT = "hint: 'qcore list' shows each plugin's kind and name; a NAME alone matches any kind"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["check", "lowering:chip"],
            "qcore check does not take kind 'lowering' ('lowering:chip'); "
            "the kinds qcore check takes: backend, quantizer",
        ),
        (
            ["show", "backnd:chip"],
            "unknown kind 'backnd' in 'backnd:chip' (did you mean 'backend'?); "
            "the kinds qcore show takes: backend, quantizer, lowering",
        ),
        (
            ["check", "quantiser:chip"],
            "unknown kind 'quantiser' in 'quantiser:chip' (did you mean 'quantizer'?); "
            "the kinds qcore check takes: backend, quantizer",
        ),
        (
            ["show", "plugin:chip"],
            "unknown kind 'plugin' in 'plugin:chip'; "
            "the kinds qcore show takes: backend, quantizer, lowering",
        ),
    ],
)
def test_a_kind_the_command_does_not_take_is_one_line_naming_the_kinds_it_does(
    fake_dist: FakeDist, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    fake_dist(
        "qchip",
        {
            "qcore.backends": {"chip": "qchip_kinds.plugin:PLUGIN"},
            "qcore.lowerings": {"chip": "qchip_kinds.plugin:LOWERING"},
        },
        {"qchip_kinds.plugin": GOOD_BACKEND.replace('"tiny"', '"chip"')},
    )
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [f"qcore: error: {message}", KIND_HINT]


def test_an_unknown_name_of_a_kind_lists_the_names_of_that_kind(
    fake_dist: FakeDist, capsys: pytest.CaptureFixture[str]
) -> None:
    one_plugin(fake_dist, "qbackend-tiny", "tiny", "qtiny_kind_names.plugin")
    one_plugin(fake_dist, "qlowering-fast", "fast", "qfast.plugin", group="qcore.lowerings")
    import qcore

    lowerings = sorted(p.name for p in qcore.list_plugins() if p.kind == "lowering")
    assert "fast" in lowerings and "tiny" not in lowerings
    assert main(["show", "lowering:tiny"]) == 2
    assert capsys.readouterr().err.splitlines()[0] == (
        f"qcore: error: unknown plugin 'lowering:tiny' (known: {', '.join(lowerings)})"
    )


def test_check_reports_progress_on_stderr_and_keeps_stdout_the_results(
    fake_dist: FakeDist,
) -> None:
    one_plugin(fake_dist, "qbackend-tiny", "tiny", "qtiny_progress.plugin", GOOD_BACKEND)
    root = one_plugin(fake_dist, "qbackend-broken", "broken", "qbroken_progress.plugin")
    run = _run_cli("check", "tiny", "broken", root=root)
    assert run.returncode == 1
    out = run.stdout.splitlines()
    assert out[0].startswith("backend:tiny: ") and out[0].endswith(" passed, 0 failed")
    assert out[1].startswith("FAIL backend:broken load broken: PluginError: ")
    assert "qbackend-broken 1.0" in out[1]
    assert out[2:] == ["backend:broken: 0 passed, 1 failed"]  # the results alone, as before
    progress = run.stderr.splitlines()
    assert len(progress) == 5, run.stderr
    assert progress[0] == "checking backend:tiny, backend:broken"  # what it runs, first
    assert progress[1] == "[1/2] backend:tiny ..."
    assert re.fullmatch(r"\[1/2\] backend:tiny passed in \d+\.\d s", progress[2])
    assert progress[3] == "[2/2] backend:broken ..."
    assert re.fullmatch(r"\[2/2\] backend:broken failed in \d+\.\d s", progress[4])


def test_check_skips_a_derived_quantizer_whose_backend_is_disabled(
    fake_dist: FakeDist, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import qcore

    one_plugin(fake_dist, "qbackend-tiny", "tiny", "qtiny_disabled.plugin", GOOD_BACKEND)
    off = [f"{p.kind}:{p.name}" for p in qcore.list_plugins()]  # every plugin, tiny too
    monkeypatch.setenv("QCORE_DISABLE_PLUGINS", ",".join(off))
    assert main(["check"]) == 0
    assert capsys.readouterr().out == ""


# qcore demo: its output paths are checked before it trains for minutes


def _demo_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(["demo", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err.splitlines()


DEMO_HINT = "hint: nothing has run yet: fix the path and rerun"


def test_demo_refuses_a_path_it_could_not_write_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a_file").write_text("")
    (tmp_path / "a_dir.png").mkdir()
    formats = ".png, .svg, .svgz, .pdf, .jpg, .jpeg, .tif, .tiff, .webp, .gif, .eps, .ps"
    cases = {
        ("--json", tmp_path / "missing" / "demo.json"): f"directory {tmp_path / 'missing'} does not exist",
        ("--json", tmp_path): "is a directory; name a file to write",
        ("--plot", tmp_path / "a_dir.png"): "is a directory; name a file to write",
        ("--plot", tmp_path / "a_file" / "demo.png"): f"{tmp_path / 'a_file'} is not a directory",
        ("--plot", tmp_path / "demo.bmp"): f"'.bmp' is not a format it can be written in "
        f"({formats})",
        ("--plot", tmp_path / "demo"): "a name without a suffix is not a format it can be "
        f"written in ({formats})",
        # nobody, root included, can create a file in /proc
        ("--json", Path("/proc/qcore-demo.json")): "cannot write in /proc (",
    }  # fmt: skip
    for (option, path), why in cases.items():
        error, hint = _demo_error([option, str(path)], capsys)
        assert error.startswith(f"qcore: error: {option} {path}: {why}"), error
        assert hint == DEMO_HINT
    same = str(tmp_path / "out.png")
    assert _demo_error(["--json", same, "--plot", same], capsys) == [
        f"qcore: error: --json and --plot both name {same}",
        DEMO_HINT,
    ]


def test_demo_accepts_every_path_it_can_write(tmp_path: Path) -> None:
    from qcore.cli.paths import PLOT_SUFFIXES, check_output_path

    existing = tmp_path / "old.json"
    existing.write_text("{}")
    check_output_path("--json", existing)  # overwritten, as before
    check_output_path("--json", tmp_path / "new.json")
    for suffix in (*PLOT_SUFFIXES, ".PNG"):
        check_output_path("--plot", tmp_path / f"chart{suffix}", PLOT_SUFFIXES)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]  # the check left nothing
    assert existing.read_text() == "{}"


def test_check_name_runs_the_backend_and_the_quantizer_derived_from_it(
    fake_dist: FakeDist,
) -> None:
    from .test_missing_extra import MAPPED_BACKEND

    root = one_plugin(fake_dist, "qbackend-tiny", "tiny", "qtiny_derived.plugin", MAPPED_BACKEND)
    run = _run_cli("check", "tiny", root=root)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stderr.splitlines()[0] == (
        "checking backend:tiny, quantizer:tiny (derived from backend tiny)"
    )
    summaries = [line for line in run.stdout.splitlines() if not line.startswith(("ok", "FAIL"))]
    assert [line.split(":")[0] + ":" + line.split(":")[1] for line in summaries] == [
        "backend:tiny",
        "quantizer:tiny",
    ]
    assert re.fullmatch(r"quantizer:tiny: [1-9]\d* passed, 0 failed", summaries[1]), summaries
    # kind:name runs that kind alone
    only = _run_cli("check", "backend:tiny", root=root)
    assert only.stderr.splitlines()[0] == "checking backend:tiny"


def test_a_long_check_reports_how_far_it_is_and_about_how_long_is_left(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from qcore import cli

    clock = iter([100.0, 104.0, 110.0, 115.0, 130.0])
    monkeypatch.setattr(cli.time, "perf_counter", lambda: next(clock))
    tick = cli._Ticker("[1/2] quantizer:big", every=10.0)  # started at 100 s
    tick(1, 50, "annotators")  # 104 s: within 10 s of the last line, silent
    tick(10, 50, "annotators")  # 110 s: 10 of 50 in 10 s, 40 s left
    tick(15, 50, "annotators")  # 115 s: silent again
    tick(40, 50, "annotators")  # 130 s: 40 in 30 s, 7.5 s left (rounds to 8)
    assert capsys.readouterr().err.splitlines() == [
        "[1/2] quantizer:big: 10/50 annotators in 10 s, about 40 s left",
        "[1/2] quantizer:big: 40/50 annotators in 30 s, about 8 s left",
    ]
