"""``qcore.export``: ``torch.export`` for quantization, with errors a user can act on;
``qcore.load_exported``: ``torch.export.load`` for a quantized program.

Every PT2E flow starts with ``torch.export.export(model, example_inputs).module()``. When
the model cannot be exported at those shapes (it branches on tensor values, reads
``.item()``, builds a shape from data), torch raises from deep inside its tracer with a
page of internals. :func:`export` runs the same call and, when it fails, raises
:class:`~qcore.errors.ExportError` naming the module (``encoder.layer.0.attention``,
``BertSelfAttention``) and the line of the model's own code that stopped the trace, and
how to fix it. The original error stays available as ``error.torch_error``, and what
torch printed while it failed (the partial graph) as ``error.torch_output``.

A PT2E-converted program saves with ``torch.export.save``, but its quantize and dequantize
ops (``torch.ops.quantized_decomposed.*``) are registered by a module torch does not
import on its own: ``torch.export.load`` in a fresh process fails with ``SerializeError:
We failed to resolve torch.ops.quantized_decomposed.dequantize_per_channel.default``.
:func:`load_exported` registers them (importing torchao's PT2E API does) and loads.
"""

from __future__ import annotations

import contextlib
import io
import linecache
import os
import sys
import traceback
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import torch
from torch import nn
from torch.fx import GraphModule

from qcore.errors import ExportError
from qcore.plugins.extras import require_pt2e

__all__ = ["ExportError", "export", "load_exported"]

_TORCH_DIR = str(Path(torch.__file__).resolve().parent)
#: What torch raises for data-dependent control flow, by class name (some of these
#: classes live in torch's private or experimental modules).
_DATA_DEPENDENT = ("GuardOnDataDependentSymNode", "DataDependentOutputException")

_FIXES = (
    "export needs a model whose Python control flow depends only on shapes known at "
    "export time: trace it at the fixed shapes you will run it with (one batch size, one "
    "sequence length), replace branches on tensor values by torch.where / torch.cond, "
    "and avoid .item() and data-dependent shapes. Hugging Face transformers: load the "
    'model with attn_implementation="eager" (or "sdpa"), use_cache=False, and export '
    "with example inputs of the exact shape you will quantize and run"
)


def export(
    model: nn.Module,
    example_inputs: tuple[Any, ...],
    example_kwargs: Mapping[str, Any] | None = None,
    *,
    dynamic_shapes: Any = None,
    strict: bool = False,
) -> GraphModule:
    """``torch.export.export(model, example_inputs, example_kwargs, ...).module()``: the
    graph module a PT2E quantizer takes (``prepare_pt2e``). A model that cannot be exported
    raises :class:`ExportError`, which names the module and the line that stopped the
    trace and says how to fix the model."""
    # torch prints the partial graph of a failed export to stderr: held back, and given
    # back (on stderr) only if the export succeeds
    printed = io.StringIO()
    try:
        with contextlib.redirect_stderr(printed):
            program = torch.export.export(
                model,
                tuple(example_inputs),
                dict(example_kwargs) if example_kwargs is not None else None,
                dynamic_shapes=dynamic_shapes,
                strict=strict,
            )
    except Exception as err:  # noqa: BLE001  (every export failure is translated)
        error = _translate(model, err)
        error.torch_output = printed.getvalue()
        raise error from None
    sys.stderr.write(printed.getvalue())
    gm = program.module()
    assert isinstance(gm, GraphModule)
    return gm


def load_exported(path: str | os.PathLike[str], **options: Any) -> torch.export.ExportedProgram:
    """``torch.export.load(path, **options)`` for a program ``torch.export.save`` wrote
    after ``convert_pt2e``: the quantized ops it calls are registered first. Where qcore
    is not installed, ``import torchao.quantization.pt2e`` before ``torch.export.load``
    does the same."""
    require_pt2e("qcore.load_exported")  # its import registers torch.ops.quantized_decomposed
    return torch.export.load(path, **options)


def _translate(model: nn.Module, err: Exception) -> ExportError:
    names = {id(module): name for name, module in model.named_modules()}
    where = _innermost_model_frame(err.__traceback__, names)
    kinds = {cls.__name__ for cls in type(err).__mro__}
    reason = _first_line(err)
    if kinds.intersection(_DATA_DEPENDENT) or "data-dependent" in str(err):
        what = "its control flow depends on tensor values (data-dependent)"
    else:
        what = f"torch.export failed ({type(err).__name__})"
    location = ""
    if where is not None:
        module_name, module, filename, lineno = where
        source = linecache.getline(filename, lineno).strip()
        label = f"'{module_name}'" if module_name else "the top-level module"
        location = f" in {label} ({type(module).__name__}), {filename}:{lineno}: `{source}`"
    message = (
        f"cannot export {type(model).__name__} at the given shapes: {what}{location}. "
        f"torch says: {reason}. To fix: {_FIXES}."
    )
    error = ExportError(message)
    error.torch_error = err
    error.module_name = where[0] if where is not None else None
    return error


def _innermost_model_frame(
    tb: TracebackType | None, names: dict[int, str]
) -> tuple[str, nn.Module, str, int] | None:
    """(module name, module, file, line) of the innermost frame outside torch that runs a
    method of one of the model's modules."""
    found = None
    for frame, lineno in traceback.walk_tb(tb):
        filename = frame.f_code.co_filename
        if filename.startswith(_TORCH_DIR):
            continue
        owner = frame.f_locals.get("self")
        if isinstance(owner, nn.Module) and id(owner) in names:
            found = (names[id(owner)], owner, filename, lineno)
    return found


def _first_line(err: Exception) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__
