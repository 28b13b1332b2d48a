"""The operators the x86 recipe quantizes, read off its annotators.

An x86 annotator (:class:`X86Annotator`) names the operators it quantizes as their own
pattern and the module types and functions that call each (``called_as``): torchao's
``set_module_type_qconfig`` / ``set_function_type_qconfig`` scope an operator by those
names. ``opt_in`` means what qcore's ``Annotator.opt_in`` says for every quantizer,
which is torchao's rule for ``matmul``: the global config leaves it out unless enabled
by name, an operator's or a module's own config runs it. Adding an annotator is then
one :class:`X86Annotator` in ``annotators.py``; everything below follows from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from qcore.pt2e.annotation.registry import Annotator


@dataclass(frozen=True)
class X86Annotator(Annotator):
    """qcore's annotator, plus ``called_as``: each operator this annotator quantizes as a
    pattern of its own -> the module types and functions that call it (each operator is
    also in ``ops``)."""

    called_as: Mapping[Any, tuple[Any, ...]] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        stray = [op for op in self.called_as if not self.handles(op)]
        if stray:
            raise ValueError(f"Annotator '{self.name}': called_as names ops not in ops: {stray}")


def _called_as(annotators: Iterable[Annotator]) -> Iterable[tuple[Any, tuple[Any, ...]]]:
    for annotator in annotators:
        if isinstance(annotator, X86Annotator):
            yield from annotator.called_as.items()


def operator_of(annotators: Iterable[Annotator]) -> dict[Any, Any]:
    """Module type or function -> the operator it scopes."""
    return {caller: op for op, callers in _called_as(annotators) for caller in callers}


def quantizable(annotators: Iterable[Annotator]) -> frozenset[Any]:
    """The operators some pattern quantizes as its own (one pattern holds one of them)."""
    return frozenset(op for op, _ in _called_as(annotators))


def opt_in_ops(annotators: Iterable[Annotator], enabled: Iterable[str] = ()) -> frozenset[Any]:
    """The operators of opt-in annotators not ``enabled`` by name, but those an enabled one
    takes (``matmul`` and ``matmul_int8`` share theirs): the global config leaves them
    alone."""
    on = set(enabled)
    opt_in = [a for a in annotators if a.opt_in]
    taken = {op for a in opt_in if a.name in on for op in a.ops}
    return frozenset(op for a in opt_in if a.name not in on for op in a.ops if op not in taken)
