"""The annotator registry: which PT2E annotators a quantizer runs, in which order.

A *namespace* is one quantizer's ordered annotator list (``"xnnpack"``, ``"x86"``). Its
owner defines it once with :meth:`AnnotatorRegistry.define`; extension distributions
append to it with :meth:`AnnotatorRegistry.add`. Backend-agnostic annotators live in the
``"common"`` namespace (:mod:`qcore.pt2e.annotation.common_annotators`); a quantizer reuses one by putting
the same :class:`Annotator` object into its own namespace, so one annotator can sit in
several namespaces and a fix to it reaches every quantizer.

This module imports nothing heavy, so listing annotators stays cheap.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from qcore.errors import PluginConflictError

if TYPE_CHECKING:
    from torch.fx import GraphModule, Node
    from torch.nn import Module
    from torchao.quantization.pt2e.quantizer import QuantizationConfig

#: ``fn(graph_module, config, filter_fn)``: annotate matching nodes that pass ``filter_fn``
#: and return the annotated partitions (torchao's and upstream's annotator signature).
AnnotateFn = Callable[
    ["GraphModule", "QuantizationConfig | None", "Callable[[Node], bool] | None"],
    "list[list[Node]] | None",
]
#: ``why_not(node, config)``: the reason the annotator declines a node it would match, or
#: None. Feeds the "why was this not quantized" report.
WhyNotFn = Callable[["Node", "QuantizationConfig"], "str | None"]

#: ``example()`` returns ``(model, example_inputs)`` containing the annotator's pattern.
ExampleFn = Callable[[], "tuple[Module, tuple[Any, ...]]"]

#: Namespaces shipped with qcore, as ``(module, table)``: defined from that table on the
#: first lookup, so that importing an annotator module registers nothing (and listing
#: annotators imports torch only when a built-in namespace is asked for).
_BUILTIN_NAMESPACES = {"common": ("qcore.pt2e.annotation.common_annotators", "COMMON")}


@dataclass(frozen=True)
class Annotator:
    """One annotator and what it can do.

    ``static``/``dynamic``: runs for static / dynamic activation configs.
    ``training_pattern``: its pattern is one a training-mode graph holds (conv → batch_norm
    before folding), so the conformance kit builds its example in train mode; it runs for
    every static config, QAT or not, as upstream does, because an unfolded eval-mode
    conv-bn matches it too.
    ``ops``: the op overloads (or overload packets) it quantizes, used to scope
    ``set_operator_type`` and to tell "no annotator for this op" in reports.
    ``opt_in``: the global config's pass leaves it out unless the quantizer enables it by
    name (``enable(name)``); every scoped config runs it within its scope (an operator
    type it handles, a module type, a module name; x86's module- and function-type
    setters are operator scopes). One meaning for every quantizer, applied once by
    :class:`~qcore.pt2e.annotation.registry_quantizer.RegistryQuantizer`: ``set_operator_type`` with
    the op of an opt-in annotator quantizes that op on every backend.
    ``why_not``: explains a declined match to the not-quantized report.
    ``example``: a small model and inputs holding the pattern, for the conformance kit
    (needed only when neither the name nor a one-op call of ``ops`` gives one).
    """

    name: str
    fn: AnnotateFn
    static: bool = True
    dynamic: bool = False
    training_pattern: bool = False
    description: str = ""
    ops: frozenset[Any] = field(default_factory=frozenset)
    opt_in: bool = False
    why_not: WhyNotFn | None = None
    example: ExampleFn | None = None

    def __post_init__(self) -> None:
        if not self.name or not self.name.replace("_", "").isalnum():
            raise ValueError(f"Annotator.name must be an identifier, got {self.name!r}")
        if not callable(self.fn):
            raise TypeError(f"Annotator '{self.name}': fn must be callable, got {self.fn!r}")
        if not (self.static or self.dynamic or self.training_pattern):
            raise ValueError(
                f"Annotator '{self.name}': at least one of static, dynamic, training_pattern "
                "must be set"
            )

    def runs_for(self, *, is_dynamic: bool, is_qat: bool) -> bool:
        """Whether a config of this kind selects the annotator."""
        del is_qat  # QAT and PTQ static configs select the same annotators
        return self.dynamic if is_dynamic else self.static or self.training_pattern

    def handles(self, op: Any) -> bool:
        """``op`` is one of ``ops`` or the overload packet of one of them."""
        return op in self.ops or any(getattr(o, "overloadpacket", None) is op for o in self.ops)

    @property
    def marks(self) -> str:
        """What it runs for, as words for ``qcore show``'s tables (``"static dynamic"``)."""
        return " ".join(
            m
            for m, on in (
                ("static", self.static),
                ("dynamic", self.dynamic),
                ("training-pattern", self.training_pattern),
                ("opt-in", self.opt_in),
            )
            if on
        )


@dataclass
class _Entry:
    annotator: Annotator
    source: str


@dataclass
class _Namespace:
    owner: str | None = None
    own: list[_Entry] = field(default_factory=list)
    added: list[_Entry] = field(default_factory=list)

    def entries(self) -> list[_Entry]:
        return self.own + self.added


class AnnotatorRegistry:
    """Namespaced, ordered annotators. The owner's list comes first, extensions after.

    Extensions come from installed distributions, which this layer does not know about:
    the API layer (``qcore.get_quantizer``) adds them, and a quantizer runs them only when
    it was built there (see :class:`~qcore.pt2e.annotation.registry_quantizer.RegistryQuantizer`).
    """

    def __init__(self) -> None:
        self._namespaces: dict[str, _Namespace] = {}

    def define(self, namespace: str, annotators: Iterable[Annotator], *, source: str) -> None:
        """Set ``namespace``'s own ordered annotators; idempotent for the same ``source``."""
        ns = self._namespaces.setdefault(namespace, _Namespace())
        entries = [_Entry(a, source) for a in annotators]
        if ns.owner is not None:
            if ns.owner != source:
                raise PluginConflictError(
                    f"annotator namespace '{namespace}' is defined by {ns.owner} and again by "
                    f"{source}"
                )
            if [e.annotator for e in ns.own] == [e.annotator for e in entries]:
                return
        names = [e.annotator.name for e in entries]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"namespace '{namespace}' ({source}) repeats annotators {duplicates}")
        for e in ns.added:
            if e.annotator.name in names:
                raise self._conflict(namespace, e.annotator.name, e.source, source)
        ns.owner, ns.own = source, entries

    def add(self, namespace: str, annotator: Annotator, *, source: str) -> None:
        """Append ``annotator`` to ``namespace`` (extensions). Idempotent for the same
        annotator and source; a name claimed by another source is an error naming both."""
        ns = self._namespaces.setdefault(namespace, _Namespace())
        for e in ns.entries():
            if e.annotator.name != annotator.name:
                continue
            if e.source == source and e.annotator == annotator:
                return
            raise self._conflict(namespace, annotator.name, e.source, source)
        ns.added.append(_Entry(annotator, source))

    def annotators(self, namespace: str, *, extensions: bool = True) -> list[Annotator]:
        """The annotators of ``namespace`` in the order a quantizer runs them: the owner's,
        then (unless ``extensions`` is False) those extensions added."""
        ns = self._lookup(namespace)
        return [e.annotator for e in (ns.entries() if extensions else ns.own)]

    def get(self, namespace: str, name: str) -> Annotator:
        """One annotator by name; the error lists the names ``namespace`` knows."""
        entries = self._lookup(namespace).entries()
        for e in entries:
            if e.annotator.name == name:
                return e.annotator
        known = ", ".join(e.annotator.name for e in entries) or "none"
        raise LookupError(f"no annotator '{name}' in namespace '{namespace}'; known: {known}")

    def source(self, namespace: str, name: str) -> str:
        """Which distribution registered annotator ``name`` into ``namespace``."""
        for e in self._lookup(namespace).entries():
            if e.annotator.name == name:
                return e.source
        self.get(namespace, name)  # raises, listing the known names
        raise AssertionError("unreachable")

    def namespaces(self) -> list[str]:
        return sorted(set(self._namespaces) | set(_BUILTIN_NAMESPACES))

    def _lookup(self, namespace: str) -> _Namespace:
        own = self._namespaces.get(namespace)
        # an extension may have added to a built-in namespace before anyone looked it up
        if namespace in _BUILTIN_NAMESPACES and (own is None or own.owner is None):
            module, table = _BUILTIN_NAMESPACES[namespace]
            self.define(namespace, getattr(importlib.import_module(module), table), source="qcore")
        if namespace not in self._namespaces:
            raise LookupError(
                f"no annotator namespace '{namespace}'; known: {', '.join(self.namespaces())}"
            )
        return self._namespaces[namespace]

    @staticmethod
    def _conflict(namespace: str, name: str, first: str, second: str) -> PluginConflictError:
        return PluginConflictError(
            f"annotator '{name}' in namespace '{namespace}' is registered by both "
            f"{first} and {second}"
        )


def is_dynamic_config(config: QuantizationConfig) -> bool:
    """Whether ``config`` quantizes activations dynamically (picks dynamic annotators)."""
    act = config.input_activation
    return act is not None and bool(act.is_dynamic)


#: The process-wide registry every quantizer and extension uses.
ANNOTATORS = AnnotatorRegistry()
