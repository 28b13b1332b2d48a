"""What each op's quantization costs: prepared and calibrated once, measured by switches.

For each op, two forward passes of the switchable reference model
(:class:`~qcore.tuning.switches.Switchboard`): with only that op quantized (its own
error), and with every op but it quantized (what leaving it in float gains). The ranking
orders by the gain, most harmful first, then by the op's own error.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from qcore.metrics import sqnr
from qcore.tuning.flows import Flow, as_tuple, calibrate, resolve_flow
from qcore.tuning.switches import QuantizedOp, Switchboard

if TYPE_CHECKING:
    from torch.fx import GraphModule
    from torchao.quantization.pt2e.quantizer import Quantizer

__all__ = ["OpCost", "Session", "output_sqnr", "sensitivity"]


def _flat(output: Any) -> torch.Tensor:
    """Every floating-point tensor of an output (a tensor, tuple, list or dict), as one."""
    if isinstance(output, torch.Tensor):
        return output.detach().float().reshape(-1)
    if isinstance(output, dict):
        output = list(output.values())
    if isinstance(output, (tuple, list)):
        parts = [_flat(o) for o in output]
        parts = [p for p in parts if p.numel()]
        return torch.cat(parts) if parts else torch.zeros(0)
    return torch.zeros(0)


def output_sqnr(reference: Any, output: Any) -> float:
    """``qcore.metrics.sqnr`` over every tensor of two model outputs."""
    return sqnr(_flat(reference), _flat(output))


@dataclass(frozen=True)
class OpCost:
    """One op's cost, measured on the example inputs against the float model's output."""

    op: QuantizedOp
    #: Output SQNR (dB) with this op alone quantized.
    alone_db: float
    #: Output SQNR gain (dB) when this op alone is left in float, all others quantized.
    gain_db: float

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def module_path(self) -> str:
        return self.op.module_path

    @property
    def kind(self) -> str:
        return self.op.kind


def _order(cost: OpCost) -> tuple[float, float]:
    gain = cost.gain_db if not math.isnan(cost.gain_db) else -math.inf
    return (-gain, cost.alone_db)


class Session:
    """A model prepared and calibrated once for ``flow``, and its switchable reference."""

    def __init__(
        self,
        model: nn.Module,
        example_inputs: Any,
        calibration: Iterable[Any],
        flow: str | Quantizer,
        quantizer_options: dict[str, Any] | None = None,
    ) -> None:
        self.model = model.eval()
        self.example_inputs = as_tuple(example_inputs)
        self.calibration = list(calibration)
        self.flow: Flow = resolve_flow(flow, dict(quantizer_options or {}))
        prepared = self.flow.prepare(model, self.example_inputs, self.flow.configuration(model, []))
        calibrate(prepared, self.calibration)
        self.board = Switchboard(self.flow.reference(prepared), self.flow.roles(prepared))
        self.ops = self.board.ops
        if hasattr(self.flow, "ops"):
            self.flow.ops = self.ops
        self.prepared = prepared
        with torch.no_grad():
            self.float_output = model(*self.example_inputs)

    def sqnr_with(self, floating: Iterable[str]) -> float:
        """Output SQNR of the reference model with ``floating`` left in float."""
        candidate = self.board.quantize_all_but(floating)
        with torch.no_grad():
            return output_sqnr(self.float_output, candidate(*self.example_inputs))

    def costs(self) -> list[OpCost]:
        """Every op's cost, most harmful first."""
        everything = self.sqnr_with(())
        costs = []
        for op in self.ops:
            with torch.no_grad():
                alone = output_sqnr(
                    self.float_output, self.board.quantize_only([op.name])(*self.example_inputs)
                )
            gain = self.sqnr_with([op.name]) - everything
            costs.append(OpCost(op, alone, gain))
        return sorted(costs, key=_order)

    def configure(self, floating: Iterable[QuantizedOp]) -> Any:
        """The flow's configuration with ``floating`` in float; a flow that cannot leave
        ops in float at all raises here."""
        return self.flow.configuration(self.model, list(floating))

    def build(self, config: Any) -> GraphModule:
        """The deployable model ``config`` gives, prepared from a copy of it and
        calibrated on the same batches."""
        prepared = self.flow.prepare(self.model, self.example_inputs, copy_config(config))
        calibrate(prepared, self.calibration)
        return self.flow.convert(prepared)


def copy_config(config: Any) -> Any:
    """A copy to prepare with, so the configuration handed to the user stays unused."""
    import copy

    return copy.deepcopy(config)


def sensitivity(
    model: nn.Module,
    example_inputs: Any,
    calibration: Iterable[Any],
    flow: str | Quantizer,
    **quantizer_options: Any,
) -> list[OpCost]:
    """Every op ``flow`` quantizes in ``model``, most harmful first (see the module
    docstring); ``calibration``: batches of model inputs (a tensor or a tuple each)."""
    return Session(model, example_inputs, calibration, flow, quantizer_options).costs()
