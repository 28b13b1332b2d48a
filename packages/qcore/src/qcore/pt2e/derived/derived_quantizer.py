"""The PT2E quantizer derived from an FX backend: one annotator per pattern of its
``BackendConfig``, configured by its default ``QConfigMapping``.

Built once per process per backend (:func:`derived_quantizer` caches the patterns and
registers them as the ``"derived.<backend>"`` annotator namespace). Scoping is
:class:`~qcore.pt2e.annotation.registry_quantizer.RegistryQuantizer`'s: ``set_global``,
``set_module_type``, ``set_module_name``, ``None`` to keep a scope in float; the default
global config is a :class:`~qcore.pt2e.derived.annotate.MappingConfig` standing for the
backend's mapping, so every match takes the qconfig ``prepare_fx`` would give it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from torch.ao.quantization import QConfigMapping, default_dynamic_qconfig
from torch.ao.quantization.backend_config import BackendConfig
from torch.fx import GraphModule
from torchao.quantization.pt2e.quantizer import QuantizationConfig

from qcore.pt2e.annotation.registry import ANNOTATORS, Annotator
from qcore.pt2e.annotation.registry_quantizer import RegistryQuantizer
from qcore.pt2e.derived.annotate import (
    MappingConfig,
    pattern_annotator,
    pattern_why_not,
    share_reused_inputs,
)
from qcore.pt2e.derived.examples import example_for
from qcore.pt2e.derived.float_convs import float_1d_convs_as_2d
from qcore.pt2e.derived.patterns import DerivedPattern, Underivable, derive_patterns
from qcore.pt2e.derived.specs import NotDerivable, config_of

__all__ = ["DerivedQuantizer", "derived_namespace", "derived_quantizer"]


def derived_namespace(backend: str) -> str:
    return f"derived.{backend}"


class DerivedQuantizer(RegistryQuantizer):
    """A backend's patterns as PT2E annotators (see the module docstring)."""

    namespace = "derived"
    #: The backend it is derived from.
    backend: str = ""
    #: The backend's patterns the derivation could not express, and why.
    underivable: tuple[Underivable, ...] = ()
    #: The matchable patterns, by annotator name.
    patterns: dict[str, DerivedPattern] = {}  # noqa: RUF012 - set once per subclass

    def finalize(self, model: GraphModule) -> None:
        share_reused_inputs(model)
        float_1d_convs_as_2d(model)

    #: ``mapping(is_qat=..., model=...)``: the backend's default QConfigMapping.
    mapping_factory: Callable[..., QConfigMapping] | None = None

    def config_for_example(self, model: Any, is_qat: bool) -> QuantizationConfig:
        """The config the conformance kit annotates ``model`` with: the backend's mapping
        built for that model (some mappings name its modules), as ``prepare_fx`` sees it."""
        if self.mapping_factory is None:
            return self.global_config
        return _mapping_config(self.mapping_factory(is_qat=is_qat, model=model), is_qat)

    def report(self) -> list[Underivable]:
        """The backend's patterns this quantizer cannot express: their ops stay in float."""
        return list(self.underivable)


def _mapping_config(mapping: QConfigMapping, is_qat: bool) -> MappingConfig:
    """A config standing for ``mapping``; its own specs are the global qconfig's (none
    when that has no PT2E form)."""
    global_q = mapping.global_qconfig
    try:
        base = config_of(global_q, is_qat) if global_q is not None else None
    except NotDerivable:
        base = None
    specs = ("input_activation", "output_activation", "weight")
    fields: dict[str, Any] = {k: getattr(base, k, None) for k in specs}
    return MappingConfig(**fields, bias=None, is_qat=is_qat, mapping=mapping)


_CLASSES: dict[tuple[str, str], type[DerivedQuantizer]] = {}


def _always_float(mapping: Callable[..., QConfigMapping]) -> list[Any]:
    """Object types the backend's default mapping sets to None, for PTQ and QAT alike."""
    ptq, qat = mapping(is_qat=False, model=None), mapping(is_qat=True, model=None)
    return [
        k
        for k, v in ptq.object_type_qconfigs.items()
        if v is None and k in qat.object_type_qconfigs and qat.object_type_qconfigs[k] is None
    ]


def _derived_class(backend: str, source: str, config_factory: Callable[[], BackendConfig],
                   mapping: Callable[..., QConfigMapping], text: Callable[[Any], str], *,
                   reference: bool) -> type[DerivedQuantizer]:  # fmt: skip
    """The quantizer class of ``backend`` as distribution ``source`` defines it, derived
    (and its annotators registered) on first use in the process."""
    known = _CLASSES.get((backend, source))
    if known is not None:
        return known
    patterns, skipped = derive_patterns(config_factory(), text, _always_float(mapping))
    annotators = [
        Annotator(
            p.name,
            pattern_annotator(p, reference),
            static=p.static and not p.training_pattern,
            dynamic=p.dynamic and not p.training_pattern,
            training_pattern=p.training_pattern,
            description=p.text,
            ops=p.ops,
            why_not=pattern_why_not(p),
            example=functools.partial(example_for, p),
        )
        for p in patterns
    ]
    namespace = derived_namespace(backend)
    ANNOTATORS.define(namespace, annotators, source=source)
    cls = _CLASSES[(backend, source)] = type(
        f"Derived{backend.title().replace('_', '')}Quantizer",
        (DerivedQuantizer,),
        {
            "namespace": namespace,
            "backend": backend,
            "underivable": tuple(skipped),
            "patterns": {p.name: p for p in patterns},
            "__module__": __name__,
        },
    )
    return cls


def derived_quantizer(
    backend: str,
    source: str,
    backend_config: Callable[[], BackendConfig],
    qconfig_mapping: Callable[..., QConfigMapping],
    text: Callable[[Any], str],
    *,
    is_qat: bool = False,
    is_dynamic: bool = False,
    model: Any = None,
    reference: bool = False,
) -> DerivedQuantizer:
    """The derived quantizer of ``backend``, its global config the backend's default
    mapping (``is_qat``), or torch's dynamic qconfig for ``is_dynamic``; ``reference``:
    the backend's FX models convert to the reference representation
    (``BackendPlugin.reference_convert``), whose qparams are the observers' own."""
    cls = _derived_class(
        backend, source, backend_config, qconfig_mapping, text, reference=reference
    )
    quantizer = cls()
    quantizer.mapping_factory = None if is_dynamic else qconfig_mapping
    if is_dynamic:
        mapping = QConfigMapping().set_global(default_dynamic_qconfig)
    else:
        mapping = qconfig_mapping(is_qat=is_qat, model=model)
    quantizer.set_global(_mapping_config(mapping, is_qat))
    return quantizer
