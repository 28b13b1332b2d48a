"""``qcore demo``: quantize one small model through every installed flow and show SQNR.

Each flow uses only the public API, exactly as a user would; a flow whose plugin is not
installed is reported as such, a flow that fails or loses accuracy fails the demo.
"""

from __future__ import annotations

import contextlib
import copy
import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING

from qcore.errors import PluginNotFoundError
from qcore.metrics import sqnr
from qcore.tables import render_table
from qcore.testing.engine import quantized_engine

if TYPE_CHECKING:
    import torch
    from torch import nn

MIN_SQNR_DB = 25.0


def _model() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    import torch
    from torch import nn

    torch.manual_seed(0)

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.relu = nn.ReLU()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(8, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.relu(self.bn(self.conv(x)))
            out: torch.Tensor = self.fc(torch.flatten(self.pool(y), 1))
            return out

    return Net().eval(), (torch.randn(4, 3, 16, 16),)


def _fx_flow(backend: str, engine: str | None) -> Callable[[], float]:
    """``qcore.fx.quantize``: the backend's convert (native kernels of quantized engine
    ``engine``, or the reference representation ExecuTorch consumes)."""

    def run() -> float:
        from qcore.fx import quantize

        model, example = _model()
        expected = model(*example)
        with quantized_engine(engine) if engine is not None else contextlib.nullcontext():
            converted = quantize(copy.deepcopy(model), backend, [example])
            return sqnr(expected, converted(*example))

    return run


def _pt2e_flow(quantizer_name: str) -> Callable[[], float]:
    def run() -> float:
        import torch
        from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

        from qcore.api import get_quantizer

        model, example = _model()
        expected = model(*example)
        quantizer = get_quantizer(quantizer_name)
        exported = torch.export.export(model, example).module()
        prepared = prepare_pt2e(exported, quantizer)
        prepared(*example)
        converted = convert_pt2e(prepared)
        return sqnr(expected, converted(*example))

    return run


FLOWS: list[tuple[str, str, Callable[[], float]]] = [
    ("FX (qcore.fx)", "onednn", _fx_flow("onednn", "onednn")),
    ("FX (qcore.fx), reference representation", "executorch", _fx_flow("executorch", None)),
    ("PT2E", "xnnpack", _pt2e_flow("xnnpack")),
]


def _no_grad(run: Callable[[], float]) -> float:
    import torch

    with torch.no_grad():
        return run()


def _print_host() -> None:
    """The host's int8 capability, once, when it limits accuracy or speed."""
    from qcore.host import probe, target

    here, chosen = probe(), target()
    notes = []
    if here.saturates_u8s8 or not here.x86:
        notes.append(f"Note: {here.describe()}.")
    if chosen != here:
        notes.append(f"Building for another CPU ({chosen.source}): {chosen.describe()}.")
    for note in notes:
        print("\n" + textwrap.fill(note, width=78))


def run_demo() -> int:
    from qcore.api import list_plugins

    plugins = list_plugins()
    print("Installed plugins:")
    print(
        render_table(
            ["KIND", "NAME", "DISTRIBUTION", "VERSION", "STATUS"],
            [[p.kind, p.name, p.distribution, p.version, p.status] for p in plugins],
        )
    )
    _print_host()
    print("\nQuantizing a conv-bn-relu-pool-linear model (SQNR against float, higher is better):")
    rows, failed = [], False
    for flow, name, run in FLOWS:
        try:
            value = _no_grad(run)
        except PluginNotFoundError:
            rows.append([flow, name, "-", "not installed"])
            continue
        except Exception as exc:  # noqa: BLE001 - the demo reports any failure and goes on
            rows.append([flow, name, "-", f"FAILED: {type(exc).__name__}: {exc}"])
            failed = True
            continue
        ok = value >= MIN_SQNR_DB
        failed |= not ok
        rows.append([flow, name, f"{value:.1f} dB", "ok" if ok else f"below {MIN_SQNR_DB} dB"])
    print(render_table(["FLOW", "PLUGIN", "SQNR", "RESULT"], rows))
    return 1 if failed else 0
