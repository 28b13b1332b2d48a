"""``qcore demo`` as a user runs it: installed from wheels with the ``demo`` extra and every
first-party plugin (the tox ``demo`` env), in a subprocess, with a fresh model cache."""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from qcore.demo import STAGE_NAMES
from qcore.demo.output import SERIES_KEY

FIRST_PARTY = {
    "FX onednn": "qbackend-onednn",
    "FX executorch": "qbackend-executorch",
    "PT2E xnnpack": "qquantizer-xnnpack",
    "PT2E x86 + Inductor": "qinductor-x86",
}


def _demo(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "QCORE_CACHE_DIR": str(tmp / "cache")}
    return subprocess.run(
        [sys.executable, "-m", "qcore.cli", "demo", *args],
        capture_output=True, text=True, env=env, check=False, timeout=900,
    )


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("demo")
    run = _demo(tmp, "--json", str(tmp / "demo.json"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return tmp, run.stdout + run.stderr, json.loads((tmp / "demo.json").read_text())


#: The second run's flows: one FX, one PT2E (the chart quantizes every prefix of the
#: network with each flow, so it is drawn here rather than for every flow of the first).
SECOND_RUN = {"FX onednn": "onednn", "PT2E xnnpack": "xnnpack"}


@pytest.fixture(scope="module")
def second_run(
    first_run: tuple[Path, str, dict[str, Any]],
) -> tuple[Path, str, dict[str, Any]]:
    """``--only`` two plugins, with the chart, after the first run trained the model."""
    tmp, _, _ = first_run
    only = [arg for plugin in SECOND_RUN.values() for arg in ("--only", plugin)]
    run = _demo(tmp, *only, "--json", str(tmp / "again.json"), "--plot", str(tmp / "demo.png"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return tmp, run.stdout, json.loads((tmp / "again.json").read_text())


def test_every_first_party_flow_keeps_top1_within_one_point(
    first_run: tuple[Path, str, dict[str, Any]],
) -> None:
    _, _, data = first_run
    flows = {f["flow"]: f for f in data["flows"]}
    assert set(FIRST_PARTY) <= set(flows)
    for name, distribution in FIRST_PARTY.items():
        flow = flows[name]
        assert flow["distribution"] == distribution and not flow["error"]
        assert flow["float_top1"] - flow["int8_top1"] <= 1.0, flow
        assert flow["float_top1"] > 90  # a real task, really learned
    assert "digits" in data["dataset"]


def test_the_table_and_the_json_hold_the_same_numbers(
    first_run: tuple[Path, str, dict[str, Any]],
) -> None:
    _, output, data = first_run
    for flow in data["flows"]:
        row = next(line for line in output.splitlines() if line.startswith(flow["flow"] + " "))
        assert f"{flow['float_top1']:.1f} -> {flow['int8_top1']:.1f}" in row
        assert f"{flow['sqnr_db']:.1f}" in row
        assert f"{flow['float_ms']:.2f} / {flow['int8_ms']:.2f}" in row


def test_the_screen_is_clean_and_fits_80_columns(
    first_run: tuple[Path, str, dict[str, Any]],
) -> None:
    _, output, _ = first_run
    assert "Warning" not in output and "warn(" not in output
    assert "Traceback" not in output
    assert all(len(line) <= 80 for line in output.splitlines()), output


def _png_text(png: bytes) -> dict[str, str]:
    """The PNG's tEXt chunks, keyword -> text (the file format, no image library)."""
    found, position = {}, 8
    while position < len(png):
        length, kind = struct.unpack(">I4s", png[position : position + 8])
        data = png[position + 8 : position + 8 + length]
        if kind == b"tEXt":
            key, _, value = data.partition(b"\0")
            found[key.decode("latin-1")] = value.decode("latin-1")
        position += 12 + length
    return found


def test_the_plot_is_a_png_with_a_series_per_flow(
    second_run: tuple[Path, str, dict[str, Any]],
) -> None:
    """The chart's lines, as the demo wrote them into the PNG: one per flow, one point
    per layer in the network's order, each the SQNR the JSON reports for that layer."""
    tmp, _, data = second_run
    png = (tmp / "demo.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert width > 400 and height > 200
    series = json.loads(_png_text(png)[SERIES_KEY])
    assert set(series) == {f["flow"] for f in data["flows"]} == set(SECOND_RUN)
    for flow in data["flows"]:
        plotted = series[flow["flow"]]
        assert list(plotted) == list(STAGE_NAMES) and len(plotted) == 6, flow["flow"]
        for stage, value in plotted.items():
            assert math.isclose(value, flow["layer_sqnr_db"][stage]), (flow["flow"], stage)


def test_a_second_run_uses_the_cached_model_and_runs_only_the_flows_asked_for(
    first_run: tuple[Path, str, dict[str, Any]], second_run: tuple[Path, str, dict[str, Any]]
) -> None:
    """The second run loads the model the first trained, and ``--only onednn --only
    xnnpack`` runs those plugins' flows alone: one row each in each of the two tables."""
    _, output, data = first_run
    assert "trained in" in output
    _, again, _ = second_run
    assert "loaded from cache" in again
    assert "Quantizing with 2 installed flow(s)" in again
    rows = [
        flow["flow"]
        for line in again.splitlines()
        for flow in data["flows"]
        if line.startswith(flow["flow"] + " ")
    ]
    assert rows == [*SECOND_RUN, *SECOND_RUN], again


def test_only_refuses_a_plugin_without_a_flow_before_any_work(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from qcore.cli import main

    assert main(["demo", "--only", "onednn", "--only", "nosuch"]) == 2
    error, hint = capsys.readouterr().err.splitlines()
    assert error == "qcore: error: --only nosuch: no installed flow uses a plugin of that name"
    assert hint.startswith("hint: the plugins with a flow here: ") and "onednn" in hint


def test_every_chart_format_the_command_accepts_is_one_matplotlib_writes(tmp_path: Path) -> None:
    """``qcore demo`` checks ``--plot``'s suffix before importing matplotlib; each suffix it
    lets through must be one that ``savefig`` writes here."""
    from matplotlib.figure import Figure

    from qcore.cli.paths import PLOT_SUFFIXES

    for suffix in PLOT_SUFFIXES:
        figure = Figure(figsize=(1, 1))
        figure.add_subplot().plot([0, 1])
        figure.savefig(tmp_path / f"chart{suffix}")
        assert (tmp_path / f"chart{suffix}").stat().st_size > 0, suffix
