"""FX graph-mode quantization with a backend named once: prepare, convert, quantize.

torch's ``prepare_fx`` / ``convert_fx`` work with any qcore backend, but they leave three
things to the user that this module does:

* functional ``F.conv*`` / ``F.linear`` calls with keyword or default arguments are
  recorded positionally while torch traces (torch's lowering reads positions only and
  crashes or drops arguments otherwise; see :mod:`qcore.fx.normalize`);
* on a target CPU that saturates int8 (see :mod:`qcore.host`), each layer's weight range
  is chosen from its calibration inputs (:mod:`qcore.fx.ranges`), so no layer pays for
  the safe range where full range is as accurate;
* the backend's own convert: native kernels, or the reference representation for
  backends whose kernels run elsewhere (``BackendPlugin.reference_convert``); a native
  model runs under its backend's quantized engine and never overwrites a tensor it still
  needs (:mod:`qcore.fx.native`).
"""

from __future__ import annotations

import os
import traceback
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn
from torch.ao.quantization import QConfigMapping
from torch.ao.quantization.quantize_fx import (
    convert_fx,
    convert_to_reference_fx,
    prepare_fx,
    prepare_qat_fx,
)
from torch.fx import GraphModule
from torch.utils.hooks import RemovableHandle

from qcore.errors import FxTraceError
from qcore.fx.histogram import with_faster_histograms
from qcore.fx.native import bind_engine, copy_summed_inputs
from qcore.fx.normalize import (
    PositionalFunctionals,
    UnquantizableCall,
    normalize_functional_calls,
)
from qcore.fx.ranges import WeightedLayer, choose_ranges, record_inputs
from qcore.fx.ranges import weighted_layers as find_weighted_layers
from qcore.int8.calibration import InputRecorder
from qcore.int8.engine import quantized_engine
from qcore.int8.saturation import RangeChoice
from qcore.int8.weight_ranges import applying
from qcore.plugins.api import (
    backend_quantized_engine,
    get_backend_config,
    get_qconfig_mapping,
    uses_reference_convert,
)

__all__ = [
    "WEIGHT_RANGES_META",
    "convert",
    "input_recorders",
    "prepare",
    "quantize",
    "weight_ranges",
]

#: ``converted.meta[WEIGHT_RANGES_META]``: node name -> RangeChoice, per decided layer.
WEIGHT_RANGES_META = "qcore_weight_ranges"


@dataclass
class _Prepared:
    backend: str
    is_qat: bool
    layers: list[WeightedLayer] = field(default_factory=list)
    recorders: dict[str, InputRecorder] = field(default_factory=dict)
    hooks: list[RemovableHandle] = field(default_factory=list)


_PREPARED: weakref.WeakKeyDictionary[GraphModule, _Prepared] = weakref.WeakKeyDictionary()


def _as_tuple(batch: Any) -> tuple[Any, ...]:
    return batch if isinstance(batch, tuple) else (batch,)


def prepare(
    model: nn.Module,
    backend: str,
    example_inputs: Any,
    *,
    is_qat: bool = False,
    mapping: QConfigMapping | None = None,
    **prepare_options: Any,
) -> GraphModule:
    """``prepare_fx`` (``prepare_qat_fx`` with ``is_qat``) for qcore backend ``backend``.

    ``mapping`` defaults to the backend's own (``qcore.get_qconfig_mapping``), built for
    the current target CPU, with torch's histogram observers swapped for qcore's twin
    (``qcore.fx.histogram``: the same ranges, found faster). Calibrate the result (PTQ)
    or train it (QAT), then call :func:`convert`. Other keywords
    (``prepare_custom_config``) go to torch.
    """
    config = get_backend_config(backend)
    if mapping is None:
        mapping = with_faster_histograms(get_qconfig_mapping(backend, is_qat=is_qat, model=model))
    torch_prepare = prepare_qat_fx if is_qat else prepare_fx
    try:
        with PositionalFunctionals():
            prepared = torch_prepare(
                model, mapping, _as_tuple(example_inputs), backend_config=config, **prepare_options
            )
    except Exception as exc:
        stopped = _where_tracing_stopped(exc)
        if stopped is None:
            raise
        raise FxTraceError(
            f"qcore.fx.prepare: FX backend '{backend}' cannot trace {type(model).__name__}: "
            f"torch.fx stopped at {stopped} ({type(exc).__name__}: {_first_line(exc)}). "
            f"Export-based flows take such models: the PT2E quantizer derived from this "
            f"backend, qcore.get_quantizer('{backend}'), or flow 'pt2e:{backend}' in qcore.tune"
        ) from exc
    state = _Prepared(backend, is_qat)
    if not is_qat:  # QAT trains against the safe range; see qcore.int8.weight_ranges
        state.layers = find_weighted_layers(prepared)
        state.recorders, state.hooks = record_inputs(prepared, state.layers)
    _PREPARED[prepared] = state
    return prepared


def _where_tracing_stopped(exc: BaseException) -> str | None:
    """``file:line`` of the model's code where symbolic tracing raised ``exc``, or None if
    ``exc`` was not raised while torch.fx traced (a model's own code runs below the tracer's
    frame; the last frame outside torch is the culprit)."""
    frames = list(traceback.walk_tb(exc.__traceback__))
    files = [frame.f_code.co_filename for frame, _ in frames]
    tracing = [i for i, name in enumerate(files) if name.endswith(_SYMBOLIC_TRACE)]
    if not tracing or isinstance(exc, UnquantizableCall):
        return None  # not tracing, or qcore.fx's own error about a call it normalises
    below = [
        (f, line)
        for f, line in frames[tracing[0] + 1 :]
        if not f.f_code.co_filename.startswith((_TORCH_DIR, _QCORE_FX_DIR))
    ]
    if not below:
        return "torch.fx's own code"
    frame, line = below[-1]
    return f"{frame.f_code.co_filename}:{line} in {frame.f_code.co_name}"


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


_SYMBOLIC_TRACE = os.path.join("torch", "fx", "_symbolic_trace.py")
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
#: qcore.fx's own code, which runs inside the tracer (normalising functional calls)
_QCORE_FX_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def convert(prepared: GraphModule, backend: str | None = None) -> GraphModule:
    """The quantized model: the backend's native kernels or its reference representation.

    ``prepared`` comes from :func:`prepare`; a model prepared by torch's ``prepare_fx``
    also works when ``backend`` names its backend, but without recorded calibration
    inputs every saturation-prone layer keeps the safe weight range.
    """
    state = _PREPARED.pop(prepared, None)
    if state is None:
        if backend is None:
            raise ValueError(
                "qcore.fx.convert: this model was not prepared by qcore.fx.prepare; "
                "pass backend=... to convert it"
            )
        state = _Prepared(backend, is_qat=False)
    elif backend is not None and backend != state.backend:
        raise ValueError(
            f"qcore.fx.convert: model was prepared for backend '{state.backend}', "
            f"not '{backend}'"
        )
    for hook in state.hooks:
        hook.remove()
    choices = choose_ranges(prepared, state.layers, state.recorders)
    normalize_functional_calls(prepared)
    config = get_backend_config(state.backend)
    torch_convert = convert_to_reference_fx if uses_reference_convert(state.backend) else convert_fx
    reference = uses_reference_convert(state.backend)
    engine = None if reference else backend_quantized_engine(state.backend)
    with applying(dict(choices.values())), quantized_engine(engine):
        converted = torch_convert(prepared, backend_config=config)
    _drop_string_annotations(converted)
    if not reference:
        copy_summed_inputs(converted)
        if engine is not None:
            converted = bind_engine(converted, engine)
    converted.meta[WEIGHT_RANGES_META] = {name: c for name, (_, c) in choices.items()}
    return converted


def _drop_string_annotations(gm: GraphModule) -> None:
    """Forget type annotations that are strings. A model written under ``from __future__
    import annotations`` gives torch's tracer its annotations as text, which torch 2.13
    keeps as a global of the generated code, and ``torch.save`` of the converted model
    then fails (``'str' object has no attribute '__name__'``). They annotate the
    generated ``forward`` only, and change nothing it computes."""
    stale = [node for node in gm.graph.nodes if isinstance(node.type, str)]
    for node in stale:
        node.type = None
    if stale:
        gm.recompile()


def input_recorders(model: nn.Module) -> dict[str, InputRecorder]:
    """The calibration inputs recorded, per layer node, in the :func:`prepare`-d graph
    ``model`` holds (or is); empty where no weight range waits for a choice."""
    found: dict[str, InputRecorder] = {}
    for module in model.modules():
        state = _PREPARED.get(module) if isinstance(module, GraphModule) else None
        if state is not None:
            found.update(state.recorders)
    return found


def weight_ranges(converted: GraphModule) -> dict[str, RangeChoice]:
    """The per-layer weight ranges :func:`convert` chose (empty on non-saturating targets)."""
    ranges: dict[str, RangeChoice] = converted.meta.get(WEIGHT_RANGES_META, {})
    return ranges


def quantize(
    model: nn.Module,
    backend: str,
    calibration_batches: Iterable[Any],
    *,
    mapping: QConfigMapping | None = None,
) -> GraphModule:
    """Post-training quantization in one call: prepare, calibrate, convert.

    ``calibration_batches``: model inputs, each a tensor or a tuple of positional
    arguments; the first also serves as the example input for tracing.
    """
    batches = iter(calibration_batches)
    try:
        first = _as_tuple(next(batches))
    except StopIteration:
        raise ValueError("qcore.fx.quantize needs at least one calibration batch") from None
    was_training = model.training
    model.eval()
    prepared = prepare(model, backend, first, mapping=mapping)
    with torch.no_grad():
        prepared(*first)
        for batch in batches:
            prepared(*_as_tuple(batch))
    converted = convert(prepared)
    model.train(was_training)
    return converted

