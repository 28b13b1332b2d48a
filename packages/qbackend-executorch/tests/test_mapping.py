"""Every observer the ExecuTorch mapping creates meets the dtype constraints of the pattern
it lands on, checked against the ``DTypeWithConstraints`` of the backend config."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.ao.quantization import ObserverBase
from torch.ao.quantization.backend_config import BackendConfig, DTypeConfig, DTypeWithConstraints
from torch.ao.quantization.fake_quantize import FakeQuantizeBase
from torch.fx import GraphModule, Node

import qcore
from qcore.zoo.models import ModelCase, all_cases, case
from qcore.zoo.suite.flow import prepare_and_calibrate, ptq

SCALE_FLOOR = 2**-12
CASES = [c for c in all_cases() if not c.name.startswith(("conv1d", "conv3d"))]


def _patterns_by_op(config: BackendConfig) -> dict[Any, list[DTypeConfig]]:
    """Every op (module type, function, method name) with the dtype configs of the
    patterns it takes part in."""
    by_op: dict[Any, list[DTypeConfig]] = {}
    for pattern_config in config.configs:
        pattern = pattern_config.pattern
        ops = pattern if isinstance(pattern, tuple) else (pattern,)
        for op in ops:
            by_op.setdefault(op, []).extend(pattern_config.dtype_configs)
    return by_op


def _op_of(node: Node, modules: dict[str, nn.Module]) -> Any:
    return type(modules[str(node.target)]) if node.op == "call_module" else node.target


def _meets(observer: Any, spec: DTypeWithConstraints) -> bool:
    if observer.dtype != spec.dtype:
        return False
    # a fake-quant's scale floor lives on the observer it wraps
    inner = observer.activation_post_process if isinstance(observer, FakeQuantizeBase) else observer
    eps = float(inner.eps) if hasattr(inner, "eps") else None
    checks = [
        spec.quant_min_lower_bound is None or observer.quant_min >= spec.quant_min_lower_bound,
        spec.quant_max_upper_bound is None or observer.quant_max <= spec.quant_max_upper_bound,
        spec.scale_min_lower_bound is None
        or (eps is not None and eps >= spec.scale_min_lower_bound),
    ]
    return all(checks)


def _activation_specs(configs: list[DTypeConfig], *, as_input: bool) -> list[DTypeWithConstraints]:
    specs = []
    for dtype_config in configs:
        if dtype_config.is_dynamic:
            continue
        spec = (
            dtype_config.input_dtype_with_constraints
            if as_input
            else dtype_config.output_dtype_with_constraints
        )
        specs.append(spec)
    return specs


def _check_observers(prepared: GraphModule, config: BackendConfig) -> list[str]:
    by_op = _patterns_by_op(config)
    modules = dict(prepared.named_modules(remove_duplicate=False))
    problems = []
    for node in prepared.graph.nodes:
        if node.op != "call_module":
            continue
        observer = modules[str(node.target)]
        if not isinstance(observer, ObserverBase | FakeQuantizeBase):
            continue
        neighbours = [(arg, False) for arg in node.all_input_nodes] + [
            (user, True) for user in node.users
        ]
        for neighbour, as_input in neighbours:
            op = _op_of(neighbour, modules) if neighbour.op != "placeholder" else None
            if op not in by_op:
                continue
            specs = _activation_specs(by_op[op], as_input=as_input)
            if not any(_meets(observer, spec) for spec in specs):
                problems.append(f"{node.target} ({observer}) next to {neighbour.name}")
    for name, module in prepared.named_modules():
        qconfig = getattr(module, "qconfig", None)
        if qconfig is None or type(module) not in by_op or not hasattr(module, "weight"):
            continue
        weight_observer, activation = qconfig.weight(), qconfig.activation()
        # the weight must meet the dtype config that its activations select
        specs = [
            d.weight_dtype_with_constraints
            for d in by_op[type(module)]
            if not d.is_dynamic and d.input_dtype == activation.dtype
        ]
        if not any(_meets(weight_observer, spec) for spec in specs if spec.dtype is not None):
            problems.append(f"weight of {name}: {weight_observer}")
    return problems


@pytest.mark.parametrize("is_qat", [False, True])
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_observer_meets_the_constraints_of_its_pattern(case: ModelCase, is_qat: bool) -> None:
    from torch.ao.quantization.quantize_fx import prepare_fx, prepare_qat_fx

    config = qcore.get_backend_config("executorch")
    mapping = qcore.get_qconfig_mapping("executorch", is_qat=is_qat)
    prepare = prepare_qat_fx if is_qat else prepare_fx
    model = case.model().train() if is_qat else case.model()
    prepared = prepare(model, mapping, case.inputs(0), backend_config=config)
    assert _check_observers(prepared, config) == []


def test_the_checker_rejects_observers_that_break_the_constraints() -> None:
    """torch's prepare already drops qconfigs that miss the constraints, so break a
    prepared model after the fact: the checker must name both culprits."""
    from torch.ao.quantization import MinMaxObserver, QConfig

    config = qcore.get_backend_config("executorch")
    prepared = prepare_and_calibrate(
        case("conv2d_relu"), qcore.get_qconfig_mapping("executorch"), config
    )
    assert _check_observers(prepared, config) == []
    observer = next(m for m in prepared.modules() if isinstance(m, ObserverBase))
    observer.eps = torch.tensor([2**-20])
    conv = next(m for m in prepared.modules() if isinstance(m, nn.Conv2d))
    conv.qconfig = QConfig(  # type: ignore[assignment]
        activation=MinMaxObserver.with_args(dtype=torch.qint8),
        weight=MinMaxObserver.with_args(dtype=torch.qint8, qscheme=torch.per_tensor_symmetric),
    )
    problems = _check_observers(prepared, config)
    assert any("activation_post_process" in p for p in problems)
    assert any(p.startswith("weight of") for p in problems)


@pytest.mark.parametrize("name", ["resnet", "mobilenet", "transformer", "functional"])
def test_calibrated_qparams_respect_the_constraints(name: str) -> None:
    """The qparams that reach the reference model: activation scales and weight ranges."""
    model_case = case(name)
    converted = ptq(
        model_case,
        qcore.get_qconfig_mapping("executorch"),
        qcore.get_backend_config("executorch"),
        convert="reference",
    )
    scales = [
        getattr(converted, str(n.args[1].target))
        for n in converted.graph.nodes
        if n.target is torch.quantize_per_tensor
    ]
    assert scales, "no activation was quantized"
    assert all(float(s) >= SCALE_FLOOR for s in scales)
    weighted = [m for m in converted.modules() if hasattr(m, "weight_quant_min")]
    assert weighted
    for module in weighted:
        assert module.weight_dtype == torch.qint8
        assert (module.weight_quant_min, module.weight_quant_max) == (-127, 127)
        assert float(module.weight_scale.min()) >= SCALE_FLOOR


def test_activations_are_qint8() -> None:
    prepared = prepare_and_calibrate(
        case("conv2d_relu"),
        qcore.get_qconfig_mapping("executorch"),
        qcore.get_backend_config("executorch"),
    )
    observers = [m for m in prepared.modules() if isinstance(m, ObserverBase)]
    assert observers and all(o.dtype == torch.qint8 for o in observers)
