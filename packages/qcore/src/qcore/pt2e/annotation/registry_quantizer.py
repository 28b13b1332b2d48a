"""A torchao ``Quantizer`` whose operator support is a namespace of the annotator registry.

A backend's quantizer subclasses :class:`RegistryQuantizer`, names its namespace and
plugin, and optionally overrides ``transform_for_annotation`` / ``finalize``. Scoping
(global, operator type, module type, module name, filter function) and the choice of
static / dynamic / QAT annotators are done here once, so every backend gets the same
semantics:

* passes run most specific first: module names, module types, operator types, global;
  the first pass that annotates a pattern wins, later passes skip annotated nodes;
* a node inside a ``set_module_name``/``set_module_type`` scope is never touched by the
  operator-type or global passes, and a ``None`` config leaves that scope in float;
* ``set_filter_function`` applies on top of every pass;
* an opt-in annotator (:attr:`~qcore.pt2e.annotation.registry.Annotator.opt_in`) runs in every
  scoped pass and in the global pass once enabled by name.

Annotators that extension distributions add to the namespace run only in a quantizer
built by ``qcore.get_quantizer`` (the API layer installs them and calls
:meth:`RegistryQuantizer.use_extensions`); a quantizer class constructed directly runs
its own annotators alone, whatever else the process has loaded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Self

from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import (
    QuantizationConfig,
    Quantizer,
    get_module_name_filter,
)

from qcore.pt2e.annotation.observable import non_float_quantized
from qcore.pt2e.annotation.registry import ANNOTATORS, Annotator, is_dynamic_config
from qcore.pt2e.annotation.report import GLOBAL_PASS, FloatNode, explain_not_quantized
from qcore.pt2e.ranges import link_weight_observers

NodeFilter = Callable[[Node], bool]


def module_type_filter(module_type: type | str) -> NodeFilter:
    """Accept nodes traced inside any module of ``module_type`` (at any depth)."""
    wanted = (
        module_type
        if isinstance(module_type, str)
        else f"{module_type.__module__}.{module_type.__qualname__}"
    )

    def accept(node: Node) -> bool:
        for _, t in node.meta.get("nn_module_stack", {}).values():
            name = t if isinstance(t, str) else f"{t.__module__}.{t.__qualname__}"
            if name == wanted:
                return True
        return False

    return accept


class RegistryQuantizer(Quantizer):  # type: ignore[misc]  # torchao is untyped
    """Scoped PT2E quantization driven by the annotators of ``namespace``."""

    #: The annotator-registry namespace this quantizer runs.
    namespace: ClassVar[str]

    def __init__(self) -> None:
        super().__init__()
        self.global_config: QuantizationConfig | None = None
        self.operator_type_config: dict[Any, QuantizationConfig | None] = {}
        self.module_type_config: dict[Any, QuantizationConfig | None] = {}
        self.module_name_config: dict[str, QuantizationConfig | None] = {}
        self.filter_fn: NodeFilter | None = None
        self.enabled_opt_in: set[str] = set()
        self.extensions_enabled = False

    # -- scoping API (upstream names) ---------------------------------------------------

    def set_global(self, quantization_config: QuantizationConfig | None) -> Self:
        self.global_config = quantization_config
        return self

    def set_operator_type(
        self, operator_type: Any, quantization_config: QuantizationConfig | None
    ) -> Self:
        """Config for the patterns of one op overload (or overload packet)."""
        if not any(a.handles(operator_type) for a in self.annotators()):
            known = sorted({str(op) for a in self.annotators() for op in a.ops})
            raise ValueError(
                f"{type(self).__name__}: no annotator handles operator {operator_type}; "
                f"known: {', '.join(known)}"
            )
        self.operator_type_config[operator_type] = quantization_config
        return self

    def set_module_type(
        self, module_type: type | str, quantization_config: QuantizationConfig | None
    ) -> Self:
        """Config for everything traced inside modules of ``module_type``; None = float."""
        self.module_type_config[module_type] = quantization_config
        return self

    def set_module_name(
        self, module_name: str, quantization_config: QuantizationConfig | None
    ) -> Self:
        """Config for everything traced inside submodule ``module_name``; None = float."""
        self.module_name_config[module_name] = quantization_config
        return self

    def set_filter_function(self, filter_fn: NodeFilter | None) -> Self:
        """Quantize only nodes for which ``filter_fn`` returns True."""
        self.filter_fn = filter_fn
        return self

    def enable(self, *names: str) -> Self:
        """Let the global config run these opt-in annotators (e.g. ``gru_io_only``) too."""
        known = {a.name for a in self.annotators()}
        for name in names:
            if name not in known:
                raise LookupError(
                    f"no annotator '{name}' in {type(self).__name__}; known: "
                    f"{', '.join(sorted(known))}"
                )
        self.enabled_opt_in.update(names)
        return self

    def use_extensions(self) -> Self:
        """Also run the annotators installed extensions added to this namespace."""
        self.extensions_enabled = True
        return self

    def _runs_nothing(self, operator: Any, config: QuantizationConfig) -> str:
        """Why ``set_operator_type(operator, config)`` would quantize nothing: said at
        prepare rather than ignored (the calls may come in any order before it)."""
        head = f"{type(self).__name__}.set_operator_type({operator}, ...)"
        # (QAT and static configs select the same annotators: one word for both)
        kind = "dynamic" if is_dynamic_config(config) else "static or QAT"
        return f"{head}: no annotator of '{self.namespace}' handles it with a {kind} config"

    # -- annotation ---------------------------------------------------------------------

    def annotators(self) -> list[Annotator]:
        return ANNOTATORS.annotators(self.namespace, extensions=self.extensions_enabled)

    def selected(
        self, config: QuantizationConfig, operator: Any = None, *, scoped: bool = False
    ) -> list[Annotator]:
        """The annotators a pass with ``config`` (restricted to ``operator``) runs, in order;
        ``scoped``: any pass but the global one."""
        dynamic, qat = is_dynamic_config(config), bool(config.is_qat)
        return [
            a
            for a in self.annotators()
            if a.runs_for(is_dynamic=dynamic, is_qat=qat)
            and (scoped or not a.opt_in or a.name in self.enabled_opt_in)
            and (operator is None or a.handles(operator))
        ]

    def passes(self) -> list[tuple[QuantizationConfig | None, NodeFilter, Any, str]]:
        """(config, scope filter, operator, scope label) per pass, most specific first."""
        name_filters = {n: get_module_name_filter(n) for n in self.module_name_config}
        type_filters = {t: module_type_filter(t) for t in self.module_type_config}
        scoped = [*name_filters.values(), *type_filters.values()]

        def unscoped(node: Node) -> bool:
            return not any(f(node) for f in scoped)

        result: list[tuple[QuantizationConfig | None, NodeFilter, Any, str]] = []
        result += [
            (c, name_filters[n], None, f"module name '{n}'")
            for n, c in self.module_name_config.items()
        ]
        result += [
            (c, type_filters[t], None, f"module type {t}")
            for t, c in self.module_type_config.items()
        ]
        result += [
            (c, unscoped, op, f"operator {op}") for op, c in self.operator_type_config.items()
        ]
        result.append((self.global_config, unscoped, None, GLOBAL_PASS))
        return result

    def annotate(self, model: GraphModule) -> GraphModule:
        user_filter = self.filter_fn
        for config, scope, operator, label in self.passes():
            if config is None:
                continue
            chosen = self.selected(config, operator, scoped=label != GLOBAL_PASS)
            if operator is not None and not chosen:
                raise ValueError(self._runs_nothing(operator, config))

            def accept(node: Node, scope: NodeFilter = scope) -> bool:
                return scope(node) and (user_filter is None or user_filter(node))

            for annotator in chosen:
                annotator.fn(model, config, accept)
                self._check_float_only(model, f"annotator '{annotator.name}'")
        self.finalize(model)
        self._check_float_only(model, f"{type(self).__name__}.finalize")
        return model

    def _check_float_only(self, model: GraphModule, who: str) -> None:
        """No annotation may observe an integer or boolean tensor (an index, a mask): its
        observer would compute nonsense or crash calibration. Every annotator checks
        this itself; this net names the one that did not (an extension's, say)."""
        for node in model.graph.nodes:
            bad = non_float_quantized(node)
            if bad:
                raise ValueError(
                    f"{type(self).__name__} ({self.namespace}): {who} annotated {node.name} "
                    f"({node.target}) to observe non-floating-point tensors: "
                    f"{', '.join(bad)}; an annotator must leave such a pattern in float "
                    "(see qcore.pt2e.annotation.observable.is_float_tensor)"
                )

    def has_qat_config(self) -> bool:
        """Whether any pass configures QAT (then batch norms stay unfolded until training
        ends, as ``prepare_qat_pt2e`` leaves them)."""
        return any(config is not None and config.is_qat for config, *_ in self.passes())

    def finalize(self, model: GraphModule) -> None:
        """Runs once after every pass (e.g. qparam propagation). Default: nothing."""

    def validate(self, model: GraphModule) -> None:
        pass

    def prepare_obs_or_fq_callback(
        self, model: GraphModule, edge_or_node_to_obs_or_fq: dict[Any, Any]
    ) -> None:
        """Link target-aware weight observers to their layers' inputs (see
        :mod:`qcore.pt2e.ranges`); nothing to do when the quantizer uses none."""
        link_weight_observers(model, edge_or_node_to_obs_or_fq)

    def explain(self, model: GraphModule) -> list[FloatNode]:
        """Every compute node left in float and why; see :mod:`qcore.pt2e.annotation.report`."""
        return explain_not_quantized(model, self)
