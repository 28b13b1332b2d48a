"""Each operator set is declared once across qcore and the plugin packages.

Two modules that spell the same set of torch ops under different names drift apart the
first time one of them gains an op; the second should import the first (the value-moving
sets live in ``qcore.pt2e.annotation.ops``: ``VIEWS``, ``MOVES``, ``SAME_VALUES``). This walks
the module globals of every module of qcore and of every first-party plugin for sets,
frozensets and tuples of op overloads or overload packets, and fails on two equal ones
that are not one object, and on a set that is mostly another without being derived from
it (drift already begun), unless :data:`EXPLAINED` says why both are needed.
"""

from __future__ import annotations

import importlib
import itertools
import pkgutil
from collections.abc import Iterator
from typing import Any

import torch

PACKAGES = ("qcore", "qquantizer_xnnpack", "qbackend_onednn", "qbackend_executorch", "qinductor_x86")
#: First-party prefixes: a module of ours that fails to import is a failure, not an
#: optional dependency (``transformers``, ``matplotlib``) that this environment lacks.
FIRST_PARTY = (*PACKAGES, "_qcore_torch")
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


def near_copies(named: dict[str, object]) -> set[tuple[frozenset[str], frozenset[str]]]:
    """Pairs of distinct op sets (each as the names it goes by) where the smaller is mostly
    the larger: more than half of it lies in the larger, and either it is not a subset (a
    copy that gained and lost ops) or it is one that holds more than half of the larger
    and lacks at most two of its ops (a copy missing one)."""
    sets: dict[int, tuple[set[str], frozenset[Any]]] = {}
    for name, value in named.items():
        if is_op_set(value):
            sets.setdefault(id(value), (set(), frozenset(value)))[0].add(name)  # type: ignore[arg-type]
    found = set()
    for (names_a, ops_a), (names_b, ops_b) in itertools.combinations(sets.values(), 2):
        (small, _), (large, _) = sorted(((ops_a, 0), (ops_b, 1)), key=lambda s: len(s[0]))
        if small == large:
            continue  # (test_no_operator_set_is_declared_twice)
        shared = len(small & large)
        near = shared < len(small) or (2 * shared > len(large) and len(large - small) <= 2)
        if 2 * shared > len(small) and near:
            found.add((frozenset(names_a), frozenset(names_b)))
    return found


def explained(pair: tuple[frozenset[str], frozenset[str]]) -> frozenset[str] | None:
    """The key of :data:`EXPLAINED` naming the two sets (by any of their names), or None."""
    a, b = pair
    return next((key for key in EXPLAINED if any(x in a and y in b for x, y in itertools.permutations(key))), None)


#: Op sets that overlap without one being built from the other, and why both are needed.
EXPLAINED = {
    frozenset({"qcore.pt2e.annotation.ops.SHARE_QPARAMS", "qcore.pt2e.annotation.ops.VIEWS"}):
        "the ops ExecuTorch's XNNPACK quantizer annotates as sharing qparams (held equal to "
        "it by the parity tests), which include views; _unsafe_view, the view it lacks, "
        "appears only after Inductor's decompositions",
    frozenset({"qcore.pt2e.annotation.ops.SHARE_QPARAMS", "qinductor_x86.quantizer.recipe.INT8_IN_INT8_OUT"}):
        "torchao's x86 recipe: the ops its kernels run on int8 codes (cat among them, which "
        "XNNPACK does not annotate as sharing), held equal to torchao by its parity tests",
    frozenset({"qcore.pt2e.annotation.ops.MOVES", "qinductor_x86.lowering.ops.TO_COMPUTE"}):
        "what a dequantized value flows through to a conv or matmul: views, clone, expand "
        "(moves that keep every value where the kernel finds it) and a dtype cast, built "
        "from VIEWS; slices, selects and squeezes change what the kernel reads",
    frozenset({"qcore.pt2e.annotation.ops.VIEWS", "qinductor_x86.lowering.liftup.LIFTABLE"}):
        "built from VIEWS: every view but _unsafe_view, which torch's own lift-up skips",
    frozenset({"qinductor_x86.lowering.ops.DEQUANTIZE", "qinductor_x86.lowering.floatweights.WEIGHT_DEQUANTIZE"}):
        "built from DEQUANTIZE: a weight's dequantize, per tensor or per channel",
}


def test_no_operator_set_is_mostly_another() -> None:
    named = {
        f"{module.__name__}.{name}": value
        for module in imported_modules()
        for name, value in vars(module).items()
    }
    found = near_copies(named)
    unexplained = sorted(sorted(min(names) for names in pair) for pair in found if explained(pair) is None)
    assert not unexplained, "op sets that are mostly another, not built from it:\n" + "\n".join(
        " ~ ".join(pair) for pair in unexplained
    )
    stale = set(EXPLAINED) - {explained(pair) for pair in found}
    assert not stale, f"explained, but no longer near: {stale}"


def test_a_near_copy_is_found_and_a_narrowing_is_not() -> None:
    aten = torch.ops.aten
    base = frozenset({aten.view.default, aten.reshape.default, aten.permute.default, aten.t.default})
    named: dict[str, object] = {
        "a.BASE": base,
        "b.DRIFTED": (aten.view.default, aten.reshape.default, aten.permute.default, aten.clone.default),
        "c.MISSING_ONE": frozenset({aten.view.default, aten.reshape.default, aten.permute.default}),
        "d.NARROWED": frozenset({aten.view.default}),
        "e.WIDER": base | {aten.slice.Tensor, aten.select.int, aten.expand.default},
        "f.HALF": frozenset({aten.view.default, aten.mm.default}),
    }
    found = {frozenset(min(names) for names in pair) for pair in near_copies(named)}
    assert frozenset({"a.BASE", "b.DRIFTED"}) in found
    assert frozenset({"a.BASE", "c.MISSING_ONE"}) in found
    assert not any("d.NARROWED" in pair or "f.HALF" in pair for pair in found), found
    assert frozenset({"a.BASE", "e.WIDER"}) not in found  # three ops added: a wider set


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
