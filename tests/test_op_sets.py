"""Each operator set is declared once across qcore and the plugin packages.

Two modules that spell the same set of torch ops under different names drift apart the
first time one of them gains an op; the second should import the first. This walks the
module globals of every module of qcore, qquantizer_xnnpack, qbackend_onednn and
qbackend_executorch (qinductor_x86 has its own check) for sets, frozensets and tuples of
op overloads or overload packets, and fails on two equal ones that are not one object.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from typing import Any

import torch

PACKAGES = ("qcore", "qquantizer_xnnpack", "qbackend_onednn", "qbackend_executorch")
#: First-party prefixes: a module of ours that fails to import is a failure, not an
#: optional dependency (``transformers``, ``matplotlib``) that this environment lacks.
FIRST_PARTY = (*PACKAGES, "qinductor_x86", "_qcore_torch")
OP_TYPES = (torch._ops.OpOverload, torch._ops.OpOverloadPacket)


def module_names() -> Iterator[str]:
    for package in PACKAGES:
        root = importlib.import_module(package)
        yield package
        for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
            if not info.name.endswith("__main__"):
                yield info.name


def imported_modules() -> list[Any]:
    modules = []
    for name in module_names():
        try:
            modules.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name is None or exc.name.startswith(FIRST_PARTY):
                raise
    return modules


def is_op_set(value: object) -> bool:
    return (
        isinstance(value, set | frozenset | tuple)
        and len(value) > 0
        and all(isinstance(v, OP_TYPES) for v in value)
    )


def duplicates(named: dict[str, object]) -> list[tuple[str, str]]:
    """Pairs of names holding equal, non-empty op sets that are not the same object."""
    by_ops: dict[frozenset[Any], list[tuple[str, object]]] = {}
    for name, value in named.items():
        if is_op_set(value):
            by_ops.setdefault(frozenset(value), []).append((name, value))  # type: ignore[arg-type]
    pairs = []
    for holders in by_ops.values():
        first_name, first = holders[0]
        pairs.extend((first_name, name) for name, value in holders[1:] if value is not first)
    return pairs


def test_no_operator_set_is_declared_twice() -> None:
    named = {
        f"{module.__name__}.{name}": value
        for module in imported_modules()
        for name, value in vars(module).items()
    }
    assert any(is_op_set(v) for v in named.values()), "the walk found no op set at all"
    found = duplicates(named)
    assert not found, "the same op set, declared twice:\n" + "\n".join(
        f"{a} == {b}" for a, b in found
    )


def test_a_second_declaration_is_found_and_a_re_export_is_not() -> None:
    aten = torch.ops.aten
    conv = frozenset({aten.conv2d.default})
    named: dict[str, object] = {
        "a.CONV": conv,
        "b.CONV": conv,  # imported: the same object
        "c.CONVS": (aten.conv2d.default,),  # spelled again
        "d.EMPTY": frozenset(),
        "e.NAMES": ("conv2d",),
    }
    assert duplicates(named) == [("a.CONV", "c.CONVS")]
