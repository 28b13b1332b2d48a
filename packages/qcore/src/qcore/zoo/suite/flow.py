"""The FX flow on a :class:`~qcore.zoo.models.ModelCase`, as a backend's tests run it.

``ptq`` prepares a case's model with a mapping and a BackendConfig, calibrates it on the
case's batches and converts it, natively (``convert_fx``, the host's kernels) or to the
reference representation (``convert_to_reference_fx``, what ExecuTorch consumes);
``run`` evaluates any model on the case's example batch. A backend that re-declares a
reference config (torch's own) checks that both give the same outputs with
:func:`assert_same_outputs`, and runs its QAT flow with :func:`qat_outputs`.
"""

from __future__ import annotations

import copy
from typing import Literal

import torch
from torch import Tensor, nn
from torch.ao.quantization import QConfigMapping
from torch.ao.quantization.backend_config import BackendConfig
from torch.ao.quantization.quantize_fx import (
    convert_fx,
    convert_to_reference_fx,
    prepare_fx,
    prepare_qat_fx,
)
from torch.fx import GraphModule

import qcore
from qcore.zoo.models import ModelCase, train_toward_float

__all__ = [
    "ConvertMode",
    "assert_same_outputs",
    "float_weighted_layers",
    "prepare_and_calibrate",
    "ptq",
    "qat_outputs",
    "quantized_op_count",
    "run",
]

ConvertMode = Literal["native", "reference"]

#: Where torch's quantized modules that run a quantized kernel live (its reference
#: modules, ``torch.ao.nn.quantized.reference``, compute in float).
_KERNEL_MODULES = ("torch.ao.nn.quantized", "torch.ao.nn.intrinsic.quantized")


def _convert(prepared: GraphModule, config: BackendConfig, convert: ConvertMode) -> GraphModule:
    if convert == "native":
        return convert_fx(prepared, backend_config=config)
    return convert_to_reference_fx(prepared, backend_config=config)


def prepare_and_calibrate(
    case: ModelCase, mapping: QConfigMapping, config: BackendConfig
) -> GraphModule:
    """``prepare_fx`` on a fresh model of the case, then every calibration batch."""
    prepared = prepare_fx(case.model(), mapping, case.inputs(0), backend_config=config)
    with torch.no_grad():
        for batch in case.calibration_batches():
            prepared(*batch)
    return prepared


def ptq(
    case: ModelCase,
    mapping: QConfigMapping,
    config: BackendConfig,
    *,
    convert: ConvertMode = "native",
) -> GraphModule:
    """Prepare, calibrate and convert (``convert_fx``, or ``convert_to_reference_fx``)."""
    return _convert(prepare_and_calibrate(case, mapping, config), config, convert)


def run(model: nn.Module, case: ModelCase) -> Tensor:
    """``model``'s output on the case's example batch, without autograd."""
    with torch.no_grad():
        out: Tensor = model(*case.inputs(0))
    return out


def quantized_op_count(model: GraphModule) -> int:
    """Quantize ops plus modules running a quantized kernel: 0 means all-float."""
    quantizes = sum(1 for n in model.graph.nodes if "quantize_per" in str(n.target))
    kernels = sum(
        1
        for m in model.modules()
        if type(m).__module__.startswith(_KERNEL_MODULES) and ".reference" not in type(m).__module__
    )
    return quantizes + kernels


#: Layers that compute with weights: where "stayed float" is a decision, not a default.
_WEIGHTED = (nn.modules.conv._ConvNd, nn.Linear, nn.Embedding, nn.EmbeddingBag, nn.RNNBase)


def float_weighted_layers(model: nn.Module) -> set[str]:
    """Names of the convolution, linear, embedding and RNN modules that still compute in
    float with float weights: torch.nn's own classes, not their quantized kernels nor the
    reference quantized modules (which subclass them)."""
    return {
        name
        for name, module in model.named_modules()
        if isinstance(module, _WEIGHTED) and type(module).__module__.startswith("torch.nn.")
    }


def assert_same_outputs(
    case: ModelCase,
    mapping: QConfigMapping,
    ours: BackendConfig,
    reference: BackendConfig,
    *,
    convert: ConvertMode = "native",
) -> GraphModule:
    """The flow with ``ours`` gives outputs bit-identical to the flow with ``reference``;
    returns the model converted with ``ours``."""
    converted = ptq(case, mapping, ours, convert=convert)
    expected = run(ptq(case, mapping, reference, convert=convert), case)
    assert torch.equal(run(converted, case), expected), (
        f"{case.name}: the config under test gives other outputs than the reference"
    )
    return converted


def qat_outputs(
    case: ModelCase, backend: str, *, convert: ConvertMode = "native"
) -> tuple[Tensor, Tensor, Tensor]:
    """(float, QAT-simulated, converted) outputs of ``prepare_qat_fx`` with the backend's
    own mapping and config, a few SGD steps towards the float outputs, then conversion."""
    float_model = case.model()
    config = qcore.get_backend_config(backend)
    mapping = qcore.get_qconfig_mapping(backend, is_qat=True, model=float_model)
    prepared = prepare_qat_fx(
        copy.deepcopy(float_model).train(), mapping, case.inputs(0), backend_config=config
    )
    train_toward_float(prepared, float_model, case.calibration_batches())
    prepared.eval()
    simulated = run(prepared, case)
    return run(float_model, case), simulated, run(_convert(prepared, config, convert), case)
