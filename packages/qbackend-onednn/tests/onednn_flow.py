"""The FX flow as the oneDNN tests run it: torch's native kernels, against torch's own
``get_onednn_backend_config()``."""

from __future__ import annotations

from torch.ao.quantization.backend_config import BackendConfig
from torch.fx import GraphModule

from qcore.engine import quantized_engine
from qcore.testing.flows import ptq, quantize_node_count, run, torch_backend_config


def torch_onednn_config() -> BackendConfig:
    return torch_backend_config("onednn")


def quantized_op_count(model: GraphModule) -> int:
    """Quantize ops plus modules running a quantized kernel: 0 means all-float."""
    kernels = sum(
        1
        for m in model.modules()
        if type(m).__module__.startswith(
            ("torch.ao.nn.quantized", "torch.ao.nn.intrinsic.quantized")
        )
    )
    return quantize_node_count(model) + kernels


__all__ = ["ptq", "quantized_engine", "quantized_op_count", "run", "torch_onednn_config"]
