"""The demo's results: a table for people, JSON for tools, a per-layer chart."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from qcore.cli.tables import render_table

__all__ = ["SERIES_KEY", "FlowResult", "render", "write_json", "write_plot"]

#: The PNG text chunk holding the plotted series, ``{flow: {stage: SQNR dB}}`` as JSON.
SERIES_KEY = "qcore-series"


@dataclass
class FlowResult:
    """One flow's numbers. Accuracies in percent, latencies in ms per batch."""

    flow: str
    plugin: str
    distribution: str
    float_top1: float = float("nan")
    int8_top1: float = float("nan")
    sqnr_db: float = float("nan")
    float_ms: float = float("nan")
    int8_ms: float = float("nan")
    lowered: str = ""
    left_in_float: str = ""
    note: str = ""
    error: str = ""
    #: the plugin itself failed to load: reported, but the plugin's problem, not a flow's
    plugin_failed: bool = False
    layer_sqnr_db: dict[str, float] = field(default_factory=dict)


def render(results: list[FlowResult]) -> str:
    """An 80-column table: numbers first, then what each flow lowered and left in float."""
    numbers = [
        [
            r.flow,
            f"{r.float_top1:.1f} -> {r.int8_top1:.1f}"
            if not r.error
            else "plugin failed to load" if r.plugin_failed else "failed",
            f"{r.sqnr_db:.1f}" if not r.error else "-",
            f"{r.float_ms:.2f} / {r.int8_ms:.2f}" if not r.error else "-",
        ]
        for r in results
    ]
    table = render_table(["FLOW", "TOP-1 % (float -> int8)", "SQNR dB", "ms float / int8"],
                         numbers)
    details = [
        [r.flow, _clip(r.error or r.lowered, 36), "" if r.error else _clip(r.left_in_float, 30)]
        for r in results
    ]
    table2 = render_table(["FLOW", "QUANTIZED", "LEFT IN FLOAT"], details)
    notes = [f"{r.flow}: {r.note}" for r in results if r.note and not r.error]
    return "\n\n".join(part for part in (table, table2, "\n".join(notes)) if part)


def _clip(text: str, width: int) -> str:
    """Keep a cell within ``width`` characters: the table must fit 80 columns."""
    return text if len(text) <= width else text[: width - 3] + "..."


def write_json(path: Path, dataset: str, results: list[FlowResult]) -> None:
    payload = {"dataset": dataset, "flows": [asdict(r) for r in results]}
    path.write_text(json.dumps(payload, indent=2, allow_nan=True) + "\n")


def write_plot(path: Path, stages: tuple[str, ...], results: list[FlowResult]) -> None:
    """SQNR of each stage's output against float, one line per flow."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 4.5))
    for r in results:
        if not r.layer_sqnr_db:
            continue
        names = [s for s in stages if s in r.layer_sqnr_db]
        axes.plot(names, [r.layer_sqnr_db[s] for s in names], marker="o", label=r.flow)
    axes.set_xlabel("layer (output of)")
    axes.set_ylabel("SQNR against float (dB)")
    axes.set_title("Per-layer int8 error, digits CNN")
    axes.grid(True, alpha=0.3)
    axes.legend(loc="lower left", fontsize=8)
    figure.tight_layout()
    # what the chart plots, read back from its lines, in the PNG's text metadata: a tool
    # (or a test) can check the series without comparing pixels
    series: dict[str, dict[str, float]] = {}
    for line in axes.get_lines():
        # matplotlib types them as any array-like; a line's data is a 1-d sequence
        points = zip(cast(Iterable[Any], line.get_xdata()), cast(Iterable[Any], line.get_ydata()),
                     strict=True)  # fmt: skip
        series[str(line.get_label())] = {str(s): float(v) for s, v in points}
    figure.savefig(path, dpi=120, metadata={SERIES_KEY: json.dumps(series)})
    plt.close(figure)
