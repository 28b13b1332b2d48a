"""FX flow helpers for the oneDNN tests: one prepare/calibrate/convert run, two configs."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.ao.quantization import QConfigMapping
from torch.ao.quantization.backend_config import BackendConfig
from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx
from torch.fx import GraphModule

from qcore.engine import quantized_engine
from qcore.testing.models import ModelCase


def torch_onednn_config() -> BackendConfig:
    """torch's own config, the independent reference (it needs ``utils`` imported first)."""
    import torch.ao.quantization.backend_config.utils  # noqa: F401
    from torch.ao.quantization.backend_config import get_onednn_backend_config

    return get_onednn_backend_config()


def ptq(case: ModelCase, mapping: QConfigMapping, config: BackendConfig) -> GraphModule:
    """Prepare, calibrate on the case's batches, convert with torch's host kernels."""
    example = case.inputs(0)
    prepared = prepare_fx(case.model(), mapping, example, backend_config=config)
    with torch.no_grad():
        for batch in case.calibration_batches():
            prepared(*batch)
    return convert_fx(prepared, backend_config=config)


def run(model: torch.nn.Module, case: ModelCase) -> Tensor:
    with torch.no_grad():
        out: Tensor = model(*case.inputs(0))
    return out


def quantized_op_count(model: GraphModule) -> int:
    """Quantize ops plus modules running a quantized kernel: 0 means all-float."""
    quantizes = sum(1 for n in model.graph.nodes if "quantize_per" in str(n.target))
    kernels = sum(
        1
        for m in model.modules()
        if type(m).__module__.startswith(
            ("torch.ao.nn.quantized", "torch.ao.nn.intrinsic.quantized")
        )
    )
    return quantizes + kernels


__all__ = ["ptq", "quantized_engine", "quantized_op_count", "run", "torch_onednn_config"]
