"""Accuracy-driven tuning: leave the most harmful ops in float until a target is met.

The ranking comes from :mod:`qcore.tuning.sensitivity` (prepared and calibrated once).
Ops are left in float one at a time in ranking order; after each, the switchable
reference model is scored again, and the walk stops once the target is met or the budget
(``max_float_fraction`` of the ops) is spent. The choice is then built for real from the
flow's own configuration (a ``QConfigMapping`` for FX, a scoped quantizer for PT2E) and
scored again; if the real model misses the target where the reference met it, the walk
goes on with real builds. A target not met is said three ways: ``result.met`` is False,
``result.message`` says why, and a :class:`TuningWarning` is raised.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from qcore.cli.tables import render_table
from qcore.tuning.sensitivity import OpCost, Session, output_sqnr
from qcore.tuning.switches import QuantizedOp

if TYPE_CHECKING:
    from torch.fx import GraphModule
    from torchao.quantization.pt2e.quantizer import Quantizer

__all__ = ["DEFAULT_TARGET_SQNR_DB", "TuneResult", "TuningWarning", "tune"]

#: The output SQNR tune aims at without a metric: 30 dB, where int8 classifiers keep
#: their top-1 in practice (a 3 % relative error).
DEFAULT_TARGET_SQNR_DB = 30.0


class TuningWarning(UserWarning):
    """The tuner could not meet its target within the float budget."""


@dataclass
class TuneResult:
    """What :func:`tune` found. ``configuration`` rebuilds ``model``: a ``QConfigMapping``
    for an FX backend (``qcore.fx.prepare(model, backend, ex, mapping=...)``), a
    configured quantizer for PT2E (``prepare_pt2e(exported, ...)``)."""

    model: GraphModule
    flow: str
    float_ops: list[QuantizedOp]
    quantizable_ops: list[QuantizedOp]
    costs: list[OpCost]
    configuration: Any
    #: what the metric measures: "metric" or "output SQNR (dB)"
    measure: str
    float_score: float
    target: float
    #: the tuned model's score, and the default (nothing in float) model's
    score: float
    int8_score: float
    met: bool
    message: str
    max_float_ops: int
    #: (ops in float, score of the switchable reference) per step of the walk
    history: list[tuple[int, float]] = field(default_factory=list)
    #: the default int8 model (nothing in float), converted: ``int8_score`` is its score,
    #: and a user checks the tuning's gain on held-out data against it
    int8_model: GraphModule | None = None

    def report(self) -> str:
        """A readable table: each op, where it runs, its cost, whether it stayed float."""
        chosen = {op.name for op in self.float_ops}
        rows = [
            [
                str(rank),
                cost.name,
                cost.module_path or "<model>",
                cost.kind,
                f"{cost.gain_db:+.1f}",
                f"{cost.alone_db:.1f}",
                "float" if cost.name in chosen else "int8",
            ]
            for rank, cost in enumerate(self.costs, 1)
        ]
        table = render_table(
            ["#", "op", "where", "kind", "gain if float (dB)", "alone (dB)", "runs in"], rows
        )
        lines = [
            f"qcore.tune, flow {self.flow}: {self.measure}",
            f"  float model {self.float_score:.4g}, target {self.target:.4g}, "
            f"int8 {self.int8_score:.4g}, tuned {self.score:.4g}",
            f"  {len(self.float_ops)} of {len(self.quantizable_ops)} ops in float "
            f"(budget {self.max_float_ops}): {self.message}",
            table,
        ]
        text = "\n".join(lines)
        print(text)
        return text


def _scorer(
    session: Session, metric: Callable[[nn.Module], float] | None
) -> Callable[[nn.Module], float]:
    if metric is not None:
        return lambda candidate: float(metric(candidate))

    def score(candidate: nn.Module) -> float:
        with torch.no_grad():
            return output_sqnr(session.float_output, candidate(*session.example_inputs))

    return score


def tune(
    model: nn.Module,
    example_inputs: Any,
    calibration: Iterable[Any],
    flow: str | Quantizer,
    *,
    metric: Callable[[nn.Module], float] | None = None,
    tolerance: float | None = None,
    target_sqnr_db: float | None = None,
    max_float_fraction: float = 0.1,
    quantizer_options: dict[str, Any] | None = None,
) -> TuneResult:
    """Quantize ``model`` with ``flow``, leaving in float the fewest ops, most harmful
    first, that bring ``metric`` within ``tolerance`` of the float model's (higher is
    better), or, without a metric, the output SQNR to ``target_sqnr_db``
    (:data:`DEFAULT_TARGET_SQNR_DB`). ``tolerance`` defaults to 1 % of the float
    model's score. See the module docstring."""
    if metric is None and tolerance is not None:
        raise TypeError(
            "qcore.tune: tolerance= goes with metric=; without one, use target_sqnr_db="
        )
    if metric is not None and target_sqnr_db is not None:
        raise TypeError("qcore.tune: give metric= and tolerance=, or target_sqnr_db=, not both")
    if not 0.0 <= max_float_fraction <= 1.0:
        raise ValueError(
            f"qcore.tune: max_float_fraction must be in [0, 1], got {max_float_fraction}"
        )
    session = Session(model, example_inputs, calibration, flow, quantizer_options)
    costs = session.costs()
    score = _scorer(session, metric)
    if metric is not None:
        float_score = score(model)
        if tolerance is None:
            tolerance = 0.01 * abs(float_score)
        target, measure = float_score - tolerance, "metric (higher is better)"
    else:
        float_score = math.inf
        target = DEFAULT_TARGET_SQNR_DB if target_sqnr_db is None else target_sqnr_db
        measure = "output SQNR against float (dB)"
    budget = math.floor(max_float_fraction * len(session.ops) + 1e-9)
    candidates = [c.op for c in costs if c.op.address is not None]
    skipped = [c.op for c in costs if c.op.address is None]

    floating: list[QuantizedOp] = []
    history = [(0, score(session.board.quantize_all_but(())))]
    while history[-1][1] < target and len(floating) < budget and len(floating) < len(candidates):
        floating.append(candidates[len(floating)])
        history.append(
            (len(floating), score(session.board.quantize_all_but(op.name for op in floating)))
        )
    int8_model = session.flow.convert(session.prepared)
    int8_score = score(int8_model)  # the default, for real
    queue = candidates[len(floating) :]
    unbuildable: list[str] = []
    config = session.configure(floating)
    try:
        built = session.build(config)
    except Exception:  # noqa: BLE001  # retried op by op below, and the culprit named
        queue, floating = list(candidates), []
        config = session.configure(floating)
        built = session.build(config)
    reached = score(built)
    best = (reached, built, config, list(floating))
    while reached < target and len(floating) < budget and queue:
        op = queue.pop(0)
        attempt = session.configure([*floating, op])
        try:
            built_attempt = session.build(attempt)
        except Exception as exc:  # noqa: BLE001  # a flow's convert may fail on one op in float
            unbuildable.append(f"{op.where}: {type(exc).__name__}: {exc}")
            continue
        floating.append(op)
        built, config = built_attempt, attempt
        reached = score(built)
        if reached > best[0]:
            best = (reached, built, config, list(floating))
    met = reached >= target
    if not met and best[0] > reached:  # an op more in float made it worse: the best found
        reached, built, config, floating = best
    if met:
        message = f"target met with {len(floating)} op(s) in float"
        if unbuildable:
            message += f" (the flow could not build in float: {'; '.join(unbuildable)})"
    else:
        why = (
            f"the budget of {budget} op(s) in float ({max_float_fraction:.0%} of "
            f"{len(session.ops)}) is spent"
            if len(floating) >= budget
            else "no op left that the configuration can leave in float"
        )
        if unbuildable:
            why += f"; the flow could not build in float: {'; '.join(unbuildable)}"
        message = f"target {target:.4g} NOT met: best {reached:.4g}; {why}"
        simulated = score(session.board.quantize_all_but(op.name for op in floating))
        if simulated >= target:
            message += (
                f"; the flow's reference (quantize/dequantize) form of the same choice meets "
                f"it ({simulated:.4g}): the converted model's kernels lose what that form "
                "does not"
            )
        if skipped:
            message += f"; {len(skipped)} op(s) cannot be addressed ({skipped[0].unaddressable})"
        warnings.warn(f"qcore.tune ({session.flow.label}): {message}", TuningWarning, stacklevel=2)
    return TuneResult(
        model=built,
        flow=session.flow.label,
        float_ops=list(floating),
        quantizable_ops=list(session.ops),
        costs=costs,
        configuration=config,
        measure=measure,
        float_score=float_score,
        target=target,
        score=reached,
        int8_score=int8_score,
        met=met,
        message=message,
        max_float_ops=budget,
        history=history,
        int8_model=int8_model,
    )
