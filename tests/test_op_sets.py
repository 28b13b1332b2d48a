"""Each operator set is declared once across qcore and the plugin packages.

Two modules that spell the same set of torch ops under different names drift apart the
first time one of them gains an op; the second should import the first. This walks the
module globals of every module of qcore and of every first-party plugin for sets,
frozensets and tuples of op overloads or overload packets, and fails on two equal ones
that are not one object, and on a set that is mostly another without being derived from
it (drift already begun), unless :data:`EXPLAINED` says why both are needed.

The ops that only move values are one table, ``qcore.pt2e.annotation.ops.VALUE_MOVES``, with
each op's ATen overloads and FX forms (torch functions, module types, method names):
in either op space, a set that lists them (three, or two that are most of it) must be
built from that table (its assignment reads it, its ``fx_forms`` or a set built from
them), or it is a second declaration.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import pkgutil
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

from qcore.pt2e.annotation.ops import VALUE_MOVES, fx_forms

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


def module_values(modules: list[Any]) -> dict[str, object]:
    """Every module-level value of ``modules``, by its dotted name."""
    return {f"{m.__name__}.{name}": value for m in modules for name, value in vars(m).items()}


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
    frozenset({"qcore.pt2e.annotation.ops.SHARE_QPARAMS", "qinductor_x86.quantizer.recipe.INT8_IN_INT8_OUT"}):
        "torchao's x86 recipe: the ops its kernels run on int8 codes (cat among them, which "
        "XNNPACK does not annotate as sharing), held equal to torchao by its parity tests",
    frozenset({"qinductor_x86.lowering.ops.DEQUANTIZE", "qinductor_x86.lowering.floatweights.WEIGHT_DEQUANTIZE"}):
        "built from DEQUANTIZE: a weight's dequantize, per tensor or per channel",
}


def test_no_operator_set_is_mostly_another() -> None:
    modules = imported_modules()
    named = module_values(modules)
    built = built_from_value_moves(modules)
    # two sets built from the value moves' table differ where a comment there says why
    found = {
        pair
        for pair in near_copies(named)
        if not all(id(named[min(names)]) in built for names in pair)
    }
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


# -- the value moves: one table, every op space ----------------------------------------------

#: Sets that list value moves to state another fact, and which fact.
NOT_VALUE_MOVES = {
    "qcore.pt2e.derived.patterns._NO_OP": "the FX calls export records no aten op for (so the "
    "derived quantizer has nothing to annotate): a fact of export, not of which ops move values",
}


def is_fx_op(value: object) -> bool:
    """An op as an FX pattern names it: a module type, a torch or operator function, a
    Tensor method's name."""
    if isinstance(value, str):
        return True
    if isinstance(value, type):
        return issubclass(value, nn.Module)
    module = str(getattr(value, "__module__", ""))
    return callable(value) and module.startswith(("torch", "_operator"))


def is_any_op_set(value: object) -> bool:
    """An op set in either space: ATen overloads, or FX forms."""
    return (
        isinstance(value, set | frozenset | tuple)
        and len(value) > 0
        and all(isinstance(v, OP_TYPES) or is_fx_op(v) for v in value)
    )


def built_from_value_moves(modules: list[Any]) -> set[int]:
    """The ids of the op sets (and the declaration) whose module-level assignment reads
    ``VALUE_MOVES``, its ``fx_forms`` or a set so built, to a fixed point, across ``modules``."""
    assignments = []
    for module in modules:
        for stmt in ast.parse(inspect.getsource(module)).body:
            if not isinstance(stmt, ast.Assign | ast.AnnAssign) or stmt.value is None:
                continue
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            held = [vars(module)[n] for n in names if is_any_op_set(vars(module).get(n))]
            reads = [n for n in ast.walk(stmt.value) if isinstance(n, ast.Name | ast.Attribute)]
            assignments.extend((module, value, reads) for value in held)
    built = {id(VALUE_MOVES), id(fx_forms)}
    grown = True
    while grown:
        grown = False
        for module, value, reads in assignments:
            if id(value) not in built and any(id(_resolved(r, module)) in built for r in reads):
                built.add(id(value))
                grown = True
    return built


def _resolved(node: ast.expr, module: Any) -> object:
    """The module's value a name or dotted name reads (looked up, never evaluated: a call
    is not run again), or None."""
    if isinstance(node, ast.Name):
        return vars(module).get(node.id)
    if isinstance(node, ast.Attribute):
        return getattr(_resolved(node.value, module), node.attr, None)
    return None


def value_move_copies(
    named: dict[str, object], built: set[int], moves: frozenset[Any]
) -> list[str]:
    """The op sets not built from the table that list value moves: three or more (a list
    of them among other ops), or two that make up at least two thirds of the set."""
    found = []
    for name, value in named.items():
        if is_any_op_set(value) and id(value) not in built and name not in NOT_VALUE_MOVES:
            ops = set(value)  # type: ignore[call-overload]
            moved = len(ops & moves)
            if moved >= 3 or (moved == 2 and 3 * moved >= 2 * len(ops)):
                found.append(name)
    return sorted(found)


def all_value_moves() -> frozenset[Any]:
    return frozenset(op for move in VALUE_MOVES.values() for op in (*move.aten, *move.fx))


def test_value_moves_are_declared_once_in_every_package_and_op_space() -> None:
    modules = imported_modules()
    assert {m.__name__.partition(".")[0] for m in modules} == set(PACKAGES)  # none skipped
    named = module_values(modules)
    built = built_from_value_moves(modules)
    found = value_move_copies(named, built, all_value_moves())
    assert not found, "value moves declared again, not built from VALUE_MOVES:\n" + "\n".join(
        found
    )
    # the walk finds each package's sets built from the table, and not the ones above
    for derived in (
        "qcore.pt2e.annotation.ops.MOVES", "qcore.pt2e.annotation.ops.SHARE_QPARAMS",
        "qcore.fx.patterns.ops.SHARE_QPARAMS_OPS", "qbackend_executorch.config.SHARE_QPARAMS_OPS",
        "qinductor_x86.lowering.ops.TO_COMPUTE", "qinductor_x86.lowering.liftup.LIFTABLE",
    ):  # fmt: skip
        assert id(named[derived]) in built, derived
    assert not any(id(named.get(name)) in built for name in NOT_VALUE_MOVES)
    assert all(name in named for name in NOT_VALUE_MOVES), "stale NOT_VALUE_MOVES entry"


def test_a_copy_of_value_moves_is_found_in_either_space_and_a_derived_set_is_not() -> None:
    aten = torch.ops.aten
    derived = frozenset({aten.view.default, aten.reshape.default, aten.permute.default})
    named: dict[str, object] = {
        "a.ATEN_COPY": frozenset({aten.view.default, aten.reshape.default, aten.permute.default}),
        "b.FX_AMONG_OTHERS": (torch.flatten, "permute", "reshape", "mean", "relu", "clamp"),
        "c.DERIVED": derived,
        "d.TWO_OF_THREE": (aten.view.default, aten.t.default, aten.mm.default),
        "e.TWO_OF_FOUR": ("view", "reshape", "mean", "relu"),
        "f.ONE": (torch.flatten, "mean", "relu"),
        "qcore.pt2e.derived.patterns._NO_OP": (nn.Identity, "contiguous", "detach"),
    }
    found = value_move_copies(named, {id(derived)}, all_value_moves())
    assert found == ["a.ATEN_COPY", "b.FX_AMONG_OTHERS", "d.TWO_OF_THREE"]
