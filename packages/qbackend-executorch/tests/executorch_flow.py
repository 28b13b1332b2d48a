"""The FX flow as the ExecuTorch tests run it: to the reference representation ExecuTorch
consumes, against torch's own ``get_executorch_backend_config()``."""

from __future__ import annotations

from functools import partial

from torch.ao.quantization.backend_config import BackendConfig

from qcore.testing import flows
from qcore.testing.flows import calibrated as prepare_and_calibrate
from qcore.testing.flows import quantize_node_count as quantize_nodes
from qcore.testing.flows import run

ptq = partial(flows.ptq, reference=True)


def torch_executorch_config() -> BackendConfig:
    return flows.torch_backend_config("executorch")


__all__ = ["prepare_and_calibrate", "ptq", "quantize_nodes", "run", "torch_executorch_config"]
