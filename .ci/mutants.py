"""The mutation check: small changes to the code that carries the numerics must each make
its owning package's tests fail.

    python .ci/mutants.py --sample 6 [--seed SEED]   # CI: a seeded sample (tox env mutation)
    python .ci/mutants.py --all [--target NAME ...]   # every mutant (the report)
    python .ci/mutants.py --list                      # how many mutants each target has

Targets and the tests that must kill their mutants are in ``mutants.toml``. A mutant is
one AST edit of an installed module (the wheel's copy, which the tests import): a flipped
comparison, a swapped arithmetic or boolean operator, an integer moved by one, a negated
condition, a removed ``not``. Each runs its target's tests with ``-x`` in a fresh
process; the mutant is killed when they fail (or time out). A surviving mutant fails the
run unless ``mutants_equivalent.toml`` lists it with the reason it cannot change behaviour.
The seed defaults to the checked-out commit, so every commit checks another sample and a
rerun of one commit checks the same one.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import os
import random
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import repo

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "mutants.toml"
EQUIVALENT = HERE / "mutants_equivalent.toml"
NO_MUTATE = "pragma: no mutate"

_COMPARE_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
    ast.In: ast.NotIn, ast.NotIn: ast.In,
}  # fmt: skip
_BINOP_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult, ast.Mod: ast.FloorDiv, ast.LShift: ast.RShift,
    ast.RShift: ast.LShift, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd,
    ast.Pow: ast.Mult,
}  # fmt: skip


@dataclass(frozen=True)
class Target:
    name: str
    module: str  # path inside site-packages, e.g. "qcore/int8/saturation.py"
    tests: tuple[str, ...]  # pytest arguments, relative to the repository root


@dataclass(frozen=True)
class Mutant:
    target: Target
    index: int  # the mutated node's position in ast.walk order
    kind: str  # e.g. "Lt->LtE"
    line: int
    where: str  # the enclosing function
    source: str  # the mutated node's source text

    @property
    def ident(self) -> str:
        """Stable across unrelated edits: module, function, kind and the node's text."""
        return f"{self.target.module}::{self.where}::{self.kind}::{self.source}"


def targets() -> list[Target]:
    data = tomllib.loads(CONFIG.read_text())
    return [Target(t["name"], t["module"], tuple(t["tests"])) for t in data["target"]]


def equivalents() -> dict[str, str]:
    if not EQUIVALENT.exists():
        return {}
    return {e["mutant"]: e["reason"] for e in tomllib.loads(EQUIVALENT.read_text()).get("equivalent", [])}


def installed(module: str) -> Path:
    """The file of ``module`` that the tests import (the installed wheel's copy)."""
    top = module.split("/", maxsplit=1)[0]
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"mutants.py: {top} is not installed here")
    path = Path(next(iter(spec.submodule_search_locations))) / module.split("/", 1)[1]
    if any(path.resolve().is_relative_to(repo.ROOT / f) for f in repo.PACKAGE_FOLDERS):
        sys.exit(f"mutants.py: {top} is imported from the source tree; install its wheel")
    return path


def _skipped_nodes(tree: ast.AST) -> set[int]:
    """Nodes no mutant may touch: docstrings, type annotations, TYPE_CHECKING blocks."""
    skip: set[int] = set()

    def mark(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mark(node.returns)
            for arg in [*node.args.args, *node.args.kwonlyargs, *node.args.posonlyargs]:
                mark(arg.annotation)
        elif isinstance(node, ast.AnnAssign):
            mark(node.annotation)
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            mark(node)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                mark(body[0])
    return skip


def _edits(node: ast.AST) -> Iterator[tuple[str, Callable[[ast.AST], None]]]:
    """(kind, edit) pairs for one node; each edit mutates a copy of that node in place."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE_SWAPS:
        new = _COMPARE_SWAPS[type(node.ops[0])]

        def swap_compare(n: ast.AST) -> None:
            n.ops = [new()]  # type: ignore[attr-defined]

        yield f"{type(node.ops[0]).__name__}->{new.__name__}", swap_compare
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAPS:
        new_op = _BINOP_SWAPS[type(node.op)]

        def swap_binop(n: ast.AST) -> None:
            n.op = new_op()  # type: ignore[attr-defined]

        yield f"{type(node.op).__name__}->{new_op.__name__}", swap_binop
    elif isinstance(node, ast.BoolOp):
        other = ast.Or if isinstance(node.op, ast.And) else ast.And

        def swap_boolop(n: ast.AST) -> None:
            n.op = other()  # type: ignore[attr-defined]

        yield f"{type(node.op).__name__}->{other.__name__}", swap_boolop
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        value = node.value

        def bump(n: ast.AST) -> None:
            n.value = value + 1  # type: ignore[attr-defined]

        yield f"{value}->{value + 1}", bump
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
        flag = node.value

        def flip(n: ast.AST) -> None:
            n.value = not flag  # type: ignore[attr-defined]

        yield f"{flag}->{not flag}", flip
    elif isinstance(node, ast.If | ast.While | ast.IfExp):

        def negate(n: ast.AST) -> None:
            n.test = ast.UnaryOp(op=ast.Not(), operand=n.test)  # type: ignore[attr-defined]

        yield "negate-condition", negate


def mutants_of(target: Target) -> list[Mutant]:
    path = installed(target.module)
    text = path.read_text()
    lines = text.splitlines()
    tree = ast.parse(text)
    skip = _skipped_nodes(tree)
    where: dict[int, str] = {}

    def name_within(node: ast.AST, name: str) -> None:
        for child in ast.iter_child_nodes(node):
            scope = name
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                scope = f"{name}.{child.name}" if name != "<module>" else child.name
            where[id(child)] = scope
            name_within(child, scope)

    name_within(tree, "<module>")
    found = []
    for index, node in enumerate(ast.walk(tree)):
        if id(node) in skip or not hasattr(node, "lineno"):
            continue
        if NO_MUTATE in lines[node.lineno - 1]:
            continue
        for kind, _ in _edits(node):
            source = ast.unparse(node.test if isinstance(node, ast.If | ast.While | ast.IfExp) else node)
            found.append(Mutant(target, index, kind, node.lineno, where.get(id(node), "<module>"), source[:80]))
    return found


def mutated_text(mutant: Mutant) -> str:
    tree = ast.parse(installed(mutant.target.module).read_text())
    node = next(n for i, n in enumerate(ast.walk(tree)) if i == mutant.index)
    edit = next(e for k, e in _edits(node) if k == mutant.kind)
    edit(node)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def run_tests(target: Target, timeout: float) -> tuple[bool, float]:
    """Whether the target's tests pass, and how long they took."""
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *target.tests],
            cwd=repo.ROOT, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return False, time.monotonic() - start
    return done.returncode == 0, time.monotonic() - start


def try_mutant(mutant: Mutant, timeout: float) -> tuple[bool, float]:
    """(killed, seconds): the installed module mutated for the duration of one test run."""
    path = installed(mutant.target.module)
    original = path.read_bytes()
    cached = path.parent / "__pycache__"
    try:
        path.write_text(mutated_text(mutant))
        for pyc in cached.glob(f"{path.stem}.*.pyc"):
            pyc.unlink()
        passed, seconds = run_tests(mutant.target, timeout)
        return not passed, seconds
    finally:
        path.write_bytes(original)
        for pyc in cached.glob(f"{path.stem}.*.pyc"):
            pyc.unlink()


def default_seed() -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo.ROOT, capture_output=True,
                          text=True, check=False)  # fmt: skip
    return done.stdout.strip() or "0"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="mutants.py", description=__doc__.split("\n")[0])
    parser.add_argument("--sample", type=int, default=0, help="this many mutants, seeded")
    parser.add_argument("--all", action="store_true", help="every mutant of the targets")
    parser.add_argument("--seed", default=None)
    parser.add_argument("--target", action="append", default=[], help="only these targets")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)
    chosen = [t for t in targets() if not args.target or t.name in args.target]
    everything = [m for t in chosen for m in mutants_of(t)]
    if args.list:
        for t in chosen:
            print(f"{t.name}: {sum(m.target is t for m in everything)} mutants")
        print(f"total: {len(everything)}")
        return 0
    known = equivalents()
    candidates = [m for m in everything if m.ident not in known]
    seed = args.seed or default_seed()
    if args.all:
        picked = candidates
    else:
        rng = random.Random(int(hashlib.sha256(seed.encode()).hexdigest(), 16))
        picked = rng.sample(candidates, min(args.sample or 6, len(candidates)))
    print(f"mutants.py: {len(picked)} of {len(candidates)} mutants (seed {seed[:12]}; "
          f"{len(known)} listed as equivalent)", flush=True)  # fmt: skip
    for target in {m.target for m in picked}:
        passed, seconds = run_tests(target, args.timeout)
        if not passed:
            print(f"mutants.py: {target.name}'s tests fail unmutated; fix them first")
            return 1
        print(f"  baseline {target.name}: green in {seconds:.0f}s", flush=True)
    survivors = []
    for mutant in picked:
        killed, seconds = try_mutant(mutant, args.timeout)
        status = "killed" if killed else "SURVIVED"
        print(f"  {status:8} {seconds:5.0f}s  {mutant.target.name} line {mutant.line}: "
              f"{mutant.kind} in {mutant.where}: {mutant.source}", flush=True)  # fmt: skip
        if not killed:
            survivors.append(mutant)
    killed_count = len(picked) - len(survivors)
    print(f"mutation score: {killed_count}/{len(picked)} killed")
    for mutant in survivors:
        print(f"survivor (kill it with a test, or list it in {EQUIVALENT.name}): {mutant.ident}")
    return 1 if survivors else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main(sys.argv[1:]))
