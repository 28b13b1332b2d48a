"""The mutation check: small changes to the code that carries the numerics must each make
its owning package's tests fail.

    python .ci/mutants.py --sample 6 [--seed SEED]   # CI: a seeded sample (tox env mutation)
    python .ci/mutants.py --all [--target NAME ...]   # every mutant (the report)
    python .ci/mutants.py --list                      # how many mutants each target has

Targets and the tests that must kill their mutants are in ``mutants.toml``. A mutant is
one AST edit of an installed module (the wheel's copy, which the tests import): a flipped
comparison, a swapped arithmetic or boolean operator, an integer moved by one, a negated
condition, a removed ``not``, one element dropped from a set literal (an op missing from
an op set). Each runs its target's tests with ``-x`` in a fresh process, and pytest's exit
code is the verdict: 1 (tests failed) killed, 0 survived, anything else an error, as are
a timeout and a mutant that makes its own module fail to import (see :func:`verdict`).
Killed is the only good outcome: an error is not a kill, and any error or survivor fails
the run. A survivor passes only if ``mutants_equivalent.toml`` lists it with the reason it
cannot change behaviour (then it is never picked). Before the mutants, each distinct test
list of the picked targets runs unmutated first, all in one pytest process (the
baseline): it must pass. In a package's own tox env, which has just run all of its tests,
``--baseline-report`` reads that run's JUnit report instead: every picked test file must
have passed there (at least one test passed, none failed); a file the run did not cover
(``tox -e x86 -- -k name``) runs unmutated here as above.
The seed defaults to the checked-out commit, so every commit checks another sample and a
rerun of one commit checks the same one.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import hashlib
import importlib.util
import os
import random
import re
import subprocess
import sys
import tempfile
import textwrap
import time
import tomllib
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
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
    occurrence: int = 0  # among mutants of the same base name in walk order, from 1; 0: unique

    @property
    def base(self) -> str:
        """Stable across unrelated edits: module, function, kind and the node's text."""
        return f"{self.target.module}::{self.where}::{self.kind}::{self.source}"

    @property
    def ident(self) -> str:
        """The base name, and where several mutants share it (the same constant twice in
        one function), which of them: an equivalent mutant must never exempt another."""
        return f"{self.base}#{self.occurrence}" if self.occurrence else self.base


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
    elif isinstance(node, ast.Set):
        # a set literal is a membership table (an op set, the names a check accepts):
        # leaving one member out is the bug of a table that forgot an entry
        for position, element in enumerate(node.elts):

            def drop(n: ast.AST, position: int = position) -> None:
                del n.elts[position]  # type: ignore[attr-defined]

            yield f"drop {ast.unparse(element)[:60]}", drop


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
    shared = Counter(m.base for m in found)
    seen: Counter[str] = Counter()
    numbered = []
    for mutant in found:
        if shared[mutant.base] > 1:
            seen[mutant.base] += 1
        numbered.append(replace(mutant, occurrence=seen[mutant.base]) if shared[mutant.base] > 1 else mutant)
    return numbered


def mutated_text(mutant: Mutant) -> str:
    tree = ast.parse(installed(mutant.target.module).read_text())
    node = next(n for i, n in enumerate(ast.walk(tree)) if i == mutant.index)
    edit = next(e for k, e in _edits(node) if k == mutant.kind)
    edit(node)
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


KILLED, SURVIVED, ERROR = "killed", "SURVIVED", "ERROR"
#: pytest's exit codes other than 0 (passed) and 1 (tests failed): none says a test failed.
_PYTEST_CODES = {
    2: "interrupted (a collection error, or -x stopped at an error outside the tests)",
    3: "pytest's internal error",
    4: "a usage error (pytest's arguments)",
    5: "no tests collected",
}
TAIL_LINES = 25


@dataclass(frozen=True)
class Run:
    """One pytest run: its exit code (None: it timed out), wall time and output."""

    code: int | None
    seconds: float
    output: str

    def tail(self, lines: int = TAIL_LINES) -> str:
        return "\n".join(self.output.rstrip().splitlines()[-lines:])


@dataclass(frozen=True)
class Verdict:
    status: str  # KILLED, SURVIVED or ERROR
    seconds: float
    why: str = ""  # for an error: what went wrong, then the tail of pytest's output


def own_inductor_cache() -> str:
    """Inductor's cache directory for this run's test processes: the one the environment
    names (tox sets one per env), else a new one, so that no other run on the machine
    (another sample, another checkout) shares compiled kernels with this one."""
    return os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="mutants-inductor-"))


def run_tests(tests: tuple[str, ...], timeout: float) -> Run:
    """The tests, in a fresh interpreter (short tracebacks: :func:`raised_at_import` reads
    their frame lines)."""
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "--tb=short", "-rfE", "-p",
             "no:cacheprovider", *tests],
            cwd=repo.ROOT, capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        output = exc.stdout or ""
        text = output.decode(errors="replace") if isinstance(output, bytes) else output
        return Run(None, time.monotonic() - start, text)
    return Run(done.returncode, time.monotonic() - start, done.stdout + done.stderr)


def raised_at_import(output: str, module: str) -> bool:
    """Whether a traceback in ``output`` runs through the top level of ``module`` (its
    path inside site-packages): the module raised while it was being imported. pytest's
    short frames read ``.../qcore/x.py:12: in <module>``, Python's own (a fresh
    interpreter's, quoted in a test's message) ``File ".../qcore/x.py", line 12, in <module>``."""
    name = re.escape(module)
    return re.search(rf'{name}(:\d+: in <module>|", line \d+, in <module>)', output) is not None


#: A short-summary line of a file that failed to collect: its node id has no ``::``.
_COLLECTION_ERROR = re.compile(r"^ERROR [^\s:]+\.py(?: - .*)?$", re.MULTILINE)


def collection_failed(output: str) -> bool:
    """Whether a test file failed to collect. Under ``-x`` pytest exits 1 for that, as for
    a failed test (2 without ``-x``); its short summary (``-rfE``) tells them apart."""
    return _COLLECTION_ERROR.search(output) is not None


def verdict(run: Run, module: str) -> Verdict:
    """A mutant's verdict from the run of its target's tests.

    Only exit code 1 (tests failed) kills, and only when every test file was collected
    (under ``-x`` a collection error exits 1 too) and the mutated module imported: a
    mutant that breaks the import is caught by any test that imports the module, whatever
    it checks, so counting it would flatter the tests (settle it with ``pragma: no mutate``
    on that line, saying why). 0 is a survivor. Everything else says nothing about the
    tests and is an error: a timeout (a hang, or a machine too slow for ``--timeout``), a
    collection error or an interrupt (2), pytest's internal or usage error (3, 4), no tests
    collected (5), a crash (a negative code: killed by a signal)."""
    tail = run.tail()
    if run.code is None:
        return Verdict(ERROR, run.seconds, f"timed out after {run.seconds:.0f}s\n{tail}")
    if run.code in (1, 2) and raised_at_import(run.output, module):
        why = f"the mutated {module} raises when imported (pytest exit {run.code})"
        return Verdict(ERROR, run.seconds, f"{why}\n{tail}")
    if run.code == 1 and collection_failed(run.output):
        why = "a test file failed to collect (pytest exit 1 under -x)"
        return Verdict(ERROR, run.seconds, f"{why}\n{tail}")
    if run.code == 1:
        return Verdict(KILLED, run.seconds)
    if run.code == 0:
        return Verdict(SURVIVED, run.seconds)
    meaning = _PYTEST_CODES.get(run.code, "a crash" if run.code < 0 else "an unknown exit code")
    return Verdict(ERROR, run.seconds, f"pytest exit {run.code}: {meaning}\n{tail}")


def try_mutant(mutant: Mutant, timeout: float) -> Verdict:
    """The installed module mutated for the duration of one test run, and the verdict."""
    path = installed(mutant.target.module)
    text = mutated_text(mutant)
    try:
        compile(text, str(path), "exec")
    except SyntaxError as exc:  # the edit itself is broken: a bug of this script
        return Verdict(ERROR, 0.0, f"the mutated module does not compile: {exc}")
    original = path.read_bytes()
    try:
        path.write_text(text)
        _forget_bytecode(path)
        return verdict(run_tests(mutant.target.tests, timeout), mutant.target.module)
    finally:
        path.write_bytes(original)
        _forget_bytecode(path)


def _forget_bytecode(path: Path) -> None:
    """Delete the cached bytecode of ``path`` (next to it, and under the pycache prefix
    tox sets), so that no interpreter runs the mutant after the original is back, nor the
    original during a mutant's run (a same-size edit written in the same second as the
    bytecode would pass the timestamp check)."""
    places = [path.parent / "__pycache__"]
    if sys.pycache_prefix:
        places.append(Path(importlib.util.cache_from_source(str(path))).parent)
    for place in places:
        for pyc in place.glob(f"{path.stem}.*.pyc"):
            pyc.unlink()


def baseline(picked: list[Mutant], timeout: float) -> list[str]:
    """The picked mutants' test files, run once unmutated in one pytest process (one
    import of torch for all of them): the problems (a test that does not pass unmutated
    makes every verdict on it meaningless)."""
    tests = tuple(dict.fromkeys(t for mutant in picked for t in mutant.target.tests))
    label = ", ".join(dict.fromkeys(mutant.target.name for mutant in picked))
    run = run_tests(tests, timeout)
    if run.code == 0:
        print(f"  baseline {label}: green in {run.seconds:.0f}s", flush=True)
        return []
    why = "timed out" if run.code is None else f"pytest exit {run.code}"
    return [f"baseline {label}: {why} unmutated ({' '.join(tests)})\n{run.tail()}"]


def _module_of(test_file: str) -> str:
    """The JUnit classname of a test file's tests: its path, dotted, without ``.py``."""
    return test_file.removesuffix(".py").replace("/", ".")


def report_outcomes(report: Path) -> dict[str, Counter[str]]:
    """Per JUnit classname (a test module, or a class inside one): how many of its tests
    passed, failed (a failure or an error) and were skipped."""
    outcomes: dict[str, Counter[str]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        kinds = {child.tag for child in case}
        outcome = "failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"
        outcomes.setdefault(case.get("classname", ""), Counter())[outcome] += 1
    return outcomes


def baseline_from_report(picked: list[Mutant], report: Path, timeout: float) -> list[str]:
    """The baseline as the env's own test run saw it (``report``, its JUnit XML): a picked
    test file that failed there is a problem; one the run did not pass at all (narrowed,
    or only skipped) runs unmutated here, as :func:`baseline` runs them."""
    if not report.is_file():
        return [f"baseline: no JUnit report at {report}"]
    outcomes = report_outcomes(report)
    tests = dict.fromkeys(t for mutant in picked for t in mutant.target.tests)
    problems, missing = [], []
    for test in tests:
        module = _module_of(test)
        seen = sum(
            (n for name, n in outcomes.items() if name == module or name.startswith(module + ".")),
            Counter(),
        )
        if seen["failed"]:
            problems.append(f"baseline: {test} failed unmutated in {report.name}")
        elif not seen["passed"]:
            missing.append(test)
    if problems:
        return problems
    if missing:
        print(f"  baseline: {report.name} did not pass {', '.join(missing)}; running them", flush=True)
        return baseline([m for m in picked if set(m.target.tests) & set(missing)], timeout)
    label = ", ".join(dict.fromkeys(mutant.target.name for mutant in picked))
    print(f"  baseline {label}: green in {report.name}", flush=True)
    return []


def default_seed() -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo.ROOT, capture_output=True,
                          text=True, check=False)  # fmt: skip
    return done.stdout.strip() or "0"


def chosen_targets(patterns: list[str]) -> list[Target]:
    """The targets named (shell patterns: ``int8-*``), or every target; a pattern that
    names none is an error, not an empty run."""
    every = targets()
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(t.name, p) for t in every)]
    if unmatched:
        sys.exit(f"mutants.py: no target matches {', '.join(unmatched)}")
    return [t for t in every if not patterns or any(fnmatch.fnmatchcase(t.name, p) for p in patterns)]


def pick(candidates: list[Mutant], size: int, seed: str) -> list[Mutant]:
    rng = random.Random(int(hashlib.sha256(seed.encode()).hexdigest(), 16))
    return rng.sample(candidates, min(size, len(candidates)))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="mutants.py", description=__doc__.split("\n")[0])
    parser.add_argument("--sample", type=int, default=6, help="this many mutants, seeded")
    parser.add_argument("--all", action="store_true", help="every mutant of the targets")
    parser.add_argument("--seed", default=None)
    parser.add_argument(
        "--target", action="append", default=[],
        help="only these targets (a shell pattern: 'int8-*')",
    )  # fmt: skip
    parser.add_argument("--list", action="store_true")
    parser.add_argument(
        "--mutant", action="append", default=[],
        help="only these, by name (a name without its #N suffix: every mutant of that name)",
    )  # fmt: skip
    parser.add_argument("--dry-run", action="store_true", help="name the picked mutants only")
    parser.add_argument("--timeout", type=float, default=600.0, help="per test run; an error")
    parser.add_argument(
        "--no-baseline", action="store_true",
        help="skip the unmutated runs (only when you have just run those tests green)",
    )  # fmt: skip
    parser.add_argument(
        "--baseline-report", type=Path, default=None,
        help="the JUnit XML of the run of these tests that just finished in this env",
    )  # fmt: skip
    args = parser.parse_args(argv)
    own_inductor_cache()
    chosen = chosen_targets(args.target)
    everything = [m for t in chosen for m in mutants_of(t)]
    if args.list:
        for t in chosen:
            print(f"{t.name}: {sum(m.target is t for m in everything)} mutants")
        print(f"total: {len(everything)}")
        return 0
    known = equivalents()
    candidates = [m for m in everything if m.ident not in known]
    seed = args.seed or default_seed()
    if args.mutant:
        picked = [m for m in everything if m.ident in args.mutant or m.base in args.mutant]
        unknown = set(args.mutant) - {m.ident for m in picked} - {m.base for m in picked}
        if unknown:
            sys.exit(f"mutants.py: no such mutant: {', '.join(sorted(unknown))}")
    elif args.all:
        picked = candidates
    else:
        picked = pick(candidates, args.sample, seed)
    print(f"mutants.py: {len(picked)} of {len(candidates)} mutants (seed {seed}; "
          f"{len(known)} listed as equivalent)", flush=True)  # fmt: skip
    if not picked:
        print("mutants.py: ERROR: no mutant picked; an empty run checks nothing")
        return 1
    if args.dry_run:
        for mutant in picked:
            print(f"  {mutant.target.name} line {mutant.line}: {mutant.ident}")
        return 0
    if args.no_baseline:
        problems = []
    elif args.baseline_report is not None:
        problems = baseline_from_report(picked, args.baseline_report, args.timeout)
    else:
        problems = baseline(picked, args.timeout)
    if problems:
        for problem in problems:
            print(f"mutants.py: ERROR {problem}")
        print("mutants.py: the tests fail unmutated; no mutant was run")
        return 1
    verdicts: dict[str, list[tuple[Mutant, Verdict]]] = {KILLED: [], SURVIVED: [], ERROR: []}
    for mutant in picked:
        result = try_mutant(mutant, args.timeout)
        verdicts[result.status].append((mutant, result))
        print(f"  {result.status:8} {result.seconds:5.0f}s  {mutant.target.name} line {mutant.line}: "
              f"{mutant.kind} in {mutant.where}: {mutant.source}", flush=True)  # fmt: skip
        if result.why:
            print(textwrap.indent(result.why, "      | "), flush=True)
    killed, survived, errors = (verdicts[s] for s in (KILLED, SURVIVED, ERROR))
    print(f"mutation score: {len(killed)}/{len(picked)} killed, {len(survived)} survived, "
          f"{len(errors)} errors")  # fmt: skip
    for mutant, _ in survived:
        print(f"survivor (kill it with a test, or list it in {EQUIVALENT.name}): {mutant.ident}")
    for mutant, result in errors:
        print(f"error (not a kill; see above): {mutant.ident}: {result.why.splitlines()[0]}")
    return 1 if survived or errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
