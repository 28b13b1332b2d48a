"""torch's FX flow on a :class:`~qcore.testing.models.ModelCase`, for checking a backend
against torch's own config: the same prepare / calibrate / convert, two configs.

A backend that mirrors one of torch's checks itself like the first-party ones do::

    ours, theirs = qcore.get_backend_config("mychip"), torch_backend_config("onednn")
    mapping = qcore.get_qconfig_mapping("mychip")
    assert torch.equal(run(ptq(case, mapping, ours), case), run(ptq(case, mapping, theirs), case))
"""

from __future__ import annotations

import copy
import importlib

import torch
from torch import Tensor
from torch.ao.quantization import QConfigMapping
from torch.ao.quantization.backend_config import BackendConfig
from torch.ao.quantization.quantize_fx import (
    convert_fx,
    convert_to_reference_fx,
    prepare_fx,
    prepare_qat_fx,
)
from torch.fx import GraphModule

from qcore.api import get_backend_config, get_qconfig_mapping
from qcore.testing.models import ModelCase, train_toward_float

__all__ = ["calibrated", "ptq", "qat", "quantize_node_count", "run", "torch_backend_config"]


def torch_backend_config(name: str) -> BackendConfig:
    """torch's own ``get_<name>_backend_config()``, the independent reference (torch 2.13
    needs ``backend_config.utils`` imported before some of them build)."""
    importlib.import_module("torch.ao.quantization.backend_config.utils")
    configs = importlib.import_module("torch.ao.quantization.backend_config")
    config: BackendConfig = getattr(configs, f"get_{name}_backend_config")()
    return config


def calibrated(case: ModelCase, mapping: QConfigMapping, config: BackendConfig) -> GraphModule:
    """``prepare_fx`` on the case's model, run on its calibration batches."""
    prepared = prepare_fx(case.model(), mapping, case.inputs(0), backend_config=config)
    with torch.no_grad():
        for batch in case.calibration_batches():
            prepared(*batch)
    return prepared


def ptq(
    case: ModelCase, mapping: QConfigMapping, config: BackendConfig, *, reference: bool = False
) -> GraphModule:
    """Prepare, calibrate, convert: to torch's native kernels, or (``reference``) to the
    reference representation (what ExecuTorch consumes)."""
    convert = convert_to_reference_fx if reference else convert_fx
    converted: GraphModule = convert(calibrated(case, mapping, config), backend_config=config)
    return converted


def run(model: torch.nn.Module, case: ModelCase) -> Tensor:
    """The model's output on the case's first input batch."""
    with torch.no_grad():
        out: Tensor = model(*case.inputs(0))
    return out


def quantize_node_count(model: GraphModule) -> int:
    """How many quantize nodes a converted graph holds: 0 means it stayed in float."""
    return sum(1 for n in model.graph.nodes if "quantize_per" in str(n.target))


def qat(case: ModelCase, backend: str, *, reference: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """QAT with ``backend``'s config and QAT mapping: ``prepare_qat_fx``, a few SGD steps
    towards the float outputs, convert (``reference``: to the reference representation).
    Returns the float, the QAT-simulated and the converted model's outputs."""
    float_model = case.model()
    config = get_backend_config(backend)
    mapping = get_qconfig_mapping(backend, is_qat=True, model=float_model)
    prepared = prepare_qat_fx(
        copy.deepcopy(float_model).train(), mapping, case.inputs(0), backend_config=config
    )
    train_toward_float(prepared, float_model, case.calibration_batches())
    prepared.eval()
    simulated = run(prepared, case)
    convert = convert_to_reference_fx if reference else convert_fx
    return run(float_model, case), simulated, run(convert(prepared, backend_config=config), case)
