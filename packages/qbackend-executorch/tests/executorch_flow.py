"""FX flow helpers for the ExecuTorch tests: the reference representation, two configs."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.ao.quantization import QConfigMapping
from torch.ao.quantization.backend_config import BackendConfig
from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx
from torch.fx import GraphModule

from qcore.testing.models import ModelCase


def torch_executorch_config() -> BackendConfig:
    """torch's own config, the independent reference (it needs ``utils`` imported first)."""
    import torch.ao.quantization.backend_config.utils  # noqa: F401
    from torch.ao.quantization.backend_config import get_executorch_backend_config

    return get_executorch_backend_config()


def prepare_and_calibrate(
    case: ModelCase, mapping: QConfigMapping, config: BackendConfig
) -> GraphModule:
    prepared = prepare_fx(case.model(), mapping, case.inputs(0), backend_config=config)
    with torch.no_grad():
        for batch in case.calibration_batches():
            prepared(*batch)
    return prepared


def ptq(case: ModelCase, mapping: QConfigMapping, config: BackendConfig) -> GraphModule:
    """Prepare, calibrate, convert to the reference representation ExecuTorch consumes."""
    return convert_to_reference_fx(
        prepare_and_calibrate(case, mapping, config), backend_config=config
    )


def run(model: torch.nn.Module, case: ModelCase) -> Tensor:
    with torch.no_grad():
        out: Tensor = model(*case.inputs(0))
    return out


def quantize_nodes(model: GraphModule) -> int:
    return sum(1 for n in model.graph.nodes if "quantize_per" in str(n.target))
