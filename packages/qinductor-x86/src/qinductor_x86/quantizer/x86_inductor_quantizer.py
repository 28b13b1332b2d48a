"""``X86InductorQuantizer``: torchao 0.18's x86 Inductor quantizer and its scoping API,
on qcore's registry-driven quantizer.

Scoping follows torchao: module names first, then operator types, then the global
config; a pattern is taken by the first pass that matches it. torchao's module-type and
function-type setters scope *operators* (``nn.Conv2d`` means every ``conv2d`` op), a
``None`` config keeps that operator in float, and the global config quantizes only the
default ops (the opt-in ``matmul`` needs its own operator or module-name config, or
``enable("matmul")``). All configs of
one quantizer must agree on QAT and on static / dynamic; a config that does not is
skipped with a warning, as upstream.
"""

from __future__ import annotations

import warnings
from typing import Any, Self

from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import QuantizationConfig

from qcore.int8 import cpu_profile as host
from qcore.pt2e.annotation.channel_order import order_inputs_for_int16_pairs
from qcore.pt2e.annotation.registry_quantizer import NodeFilter, RegistryQuantizer
from qcore.pt2e.annotation.report import GLOBAL_PASS
from qcore.pt2e.annotation.transforms import addmm_to_linear, sdpa_as_matmuls
from qinductor_x86.quantizer import annotators  # noqa: F401  (defines the "x86" namespace)
from qinductor_x86.quantizer.config import (
    get_default_x86_inductor_quantization_config,
    get_x86_inductor_linear_dynamic_fp16_config,
)
from qinductor_x86.quantizer.operators import operator_of, opt_in_ops
from qinductor_x86.quantizer.passthrough import share_int8_outputs
from qinductor_x86.quantizer.recipe import INT8_IN_INT8_OUT
from qinductor_x86.quantizer.saturation_warning import watch_layers

__all__ = [
    "X86InductorQuantizer",
    "get_default_x86_inductor_quantization_config",
    "get_x86_inductor_linear_dynamic_fp16_config",
    "make_quantizer",
]

Pass = tuple[QuantizationConfig | None, NodeFilter, Any, str]


def _mode(config: QuantizationConfig) -> tuple[bool, bool | None]:
    """(QAT?, dynamic?) of a config; dynamic is None when it quantizes no activation."""
    act = config.input_activation
    return bool(config.is_qat), (None if act is None else bool(act.is_dynamic))


class X86InductorQuantizer(RegistryQuantizer):
    """PT2E quantizer whose output torch's (and qinductor-x86's) x86 Inductor passes lower
    to oneDNN int8 kernels. Configure with ``set_global`` and the torchao-named setters,
    then hand to ``prepare_pt2e`` / ``prepare_qat_pt2e``."""

    namespace = "x86"

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        """``addmm`` with a constant weight (Hugging Face's ``Conv1D``) becomes the
        ``linear`` it computes, so it is quantized and lowered like one. For a target
        without VNNI (post-training), a linear fed by another linear takes its input
        channels in an order in which its full-range weights cannot overflow an int16
        pair, where one exists (``qcore.pt2e.annotation.channel_order``): it then runs
        exactly at single depth. With ``matmul_int8`` enabled for a VNNI or AMX target,
        scaled-dot-product attention becomes its two matmuls around a softmax (Hugging
        Face's attention), which that row quantizes."""
        model = addmm_to_linear(model)
        if host.target().saturates_u8s8:
            # (QAT trains the weights: an order chosen before training would not hold)
            return model if self.has_qat_config() else order_inputs_for_int16_pairs(model)
        if "matmul_int8" not in self.enabled_opt_in:
            return model  # (left whole, Inductor runs it as one flash-attention kernel)
        return sdpa_as_matmuls(model)

    # -- torchao's scoping API ------------------------------------------------------------

    def set_global(self, quantization_config: QuantizationConfig | None) -> Self:
        if self._skip(quantization_config, "Skip the global quantization config."):
            return self
        return super().set_global(quantization_config)

    def get_global_quantization_config(self) -> QuantizationConfig | None:
        return self.global_config

    def set_module_name_qconfig(
        self, module_name: str, quantization_config: QuantizationConfig | None
    ) -> Self:
        """Config for every supported pattern inside submodule ``module_name`` (``matmul``
        included); None keeps the submodule in float."""
        if self._skip(quantization_config, f"Skip the quantization config for {module_name}."):
            return self
        return self.set_module_name(module_name, quantization_config)

    def set_module_type_qconfig(
        self, module_type: Any, quantization_config: QuantizationConfig | None
    ) -> Self:
        """Config for the operator a module type computes, wherever it is called:
        ``nn.Conv2d`` scopes every ``conv2d`` op, as upstream."""
        return self._set_operator_of(module_type, quantization_config, "module")

    def set_function_type_qconfig(
        self, function_type: Any, quantization_config: QuantizationConfig | None
    ) -> Self:
        """Config for the operator a function computes (``torch.matmul``, ``F.conv2d``)."""
        return self._set_operator_of(function_type, quantization_config, "function")

    def _set_operator_of(
        self, key: Any, quantization_config: QuantizationConfig | None, kind: str
    ) -> Self:
        if self._skip(quantization_config, f"Skip the quantization config for {key}."):
            return self
        operators = operator_of(self.annotators())
        if key not in operators:
            warnings.warn(
                f"{kind}: X86InductorQuantizer cannot scope {key}; known: "
                f"{', '.join(sorted({getattr(k, '__name__', str(k)) for k in operators}))}",
                stacklevel=3,
            )
            return self
        return self.set_operator_type(operators[key], quantization_config)

    def _skip(self, config: QuantizationConfig | None, skipped: str) -> bool:
        """Warn and say so when ``config`` mixes QAT / non-QAT or static / dynamic with the
        configs already set (upstream skips such a config the same way)."""
        if config is None:
            return False
        qat, dynamic = _mode(config)
        set_ = [
            c
            for c in (
                *self.module_name_config.values(),
                *self.module_type_config.values(),
                *self.operator_type_config.values(),
                self.global_config,
            )
            if c is not None
        ]
        problems = []
        if any(_mode(c)[0] != qat for c in set_):
            problems.append("Mixed QAT and Non-QAT quantization config is not supported.")
        if dynamic is not None and any(_mode(c)[1] not in {None, dynamic} for c in set_):
            problems.append("Mixed dynamic and static quantization config is not supported.")
        for problem in problems:
            warnings.warn(problem, stacklevel=3)
        if problems:
            warnings.warn(skipped, stacklevel=3)
        return bool(problems)

    # -- passes ---------------------------------------------------------------------------

    def passes(self) -> list[Pass]:
        """qcore's passes, with torchao's operator semantics on top: an operator pass
        takes only nodes of its own operator among the int8 pass-through ops; a ``None``
        operator config keeps that operator away from every later pass; the global pass
        never takes the ops of opt-in annotators (``matmul``) not enabled by name."""
        result: list[Pass] = []
        kept_float: set[Any] = set()
        for config, base_scope, operator, label in super().passes():
            scope = base_scope
            if operator is not None:
                scope = _only_own_passthrough(scope, operator)
            if kept_float:
                scope = _without_ops(scope, frozenset(kept_float))
            if operator is None and label == GLOBAL_PASS:
                scope = _without_ops(scope, opt_in_ops(self.annotators(), self.enabled_opt_in))
            result.append((config, scope, operator, label))
            if operator is not None and config is None:
                kept_float.add(operator)
        return result

    def finalize(self, model: GraphModule) -> None:
        share_int8_outputs(model)

    def prepare_obs_or_fq_callback(
        self, model: GraphModule, edge_or_node_to_obs_or_fq: dict[Any, Any]
    ) -> None:
        """qcore's linking of weight observers to their inputs, then the check that warns
        at ``convert_pt2e`` when the model needs this package's lowering and it is not
        installed (:mod:`qinductor_x86.quantizer.saturation_warning`)."""
        super().prepare_obs_or_fq_callback(model, edge_or_node_to_obs_or_fq)
        watch_layers(edge_or_node_to_obs_or_fq)


def _targets(node: Node, ops: frozenset[Any]) -> bool:
    target = node.target
    return target in ops or getattr(target, "overloadpacket", None) in ops


def _without_ops(scope: NodeFilter, ops: frozenset[Any]) -> NodeFilter:
    return lambda node: scope(node) and not _targets(node, ops)


def _only_own_passthrough(scope: NodeFilter, operator: Any) -> NodeFilter:
    others = frozenset(op for op in INT8_IN_INT8_OUT if not _targets_op(op, operator))
    return _without_ops(scope, others)


def _targets_op(op: Any, operator: Any) -> bool:
    return op is operator or getattr(op, "overloadpacket", None) is operator


def make_quantizer(**options: Any) -> X86InductorQuantizer:
    """An ``X86InductorQuantizer`` whose global config is
    ``get_default_x86_inductor_quantization_config(**options)`` (the plugin factory)."""
    return X86InductorQuantizer().set_global(
        get_default_x86_inductor_quantization_config(**options)
    )
