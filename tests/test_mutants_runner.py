"""``.ci/mutants.py``'s verdicts cannot flatter: only pytest's "tests failed" (exit 1) kills a
mutant, and only when the mutated module still imports; a survivor, a timeout, a
collection error, any other exit code or a failing baseline fails the run. And
``.ci/MUTANTS.md``'s counts agree with ``.ci/mutants_equivalent.toml`` and add up.

The runner is driven with its pytest runs faked (``subprocess.run`` or ``run_tests``
replaced by given exit codes and outputs), and end to end on a tiny package and its tests
in a temporary folder (three real pytest runs, no torch).
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / ".ci"


def _load_mutants() -> ModuleType:
    """``.ci/mutants.py`` by path; its sibling ``repo`` is imported with ``.ci`` on the path
    for the load only, so no CI script stays importable from the tests."""
    added = "repo" not in sys.modules
    sys.path.insert(0, str(CI))
    try:
        spec = importlib.util.spec_from_file_location("qcore_ci_mutants", CI / "mutants.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses resolve their module by name
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(CI))
        if added:
            sys.modules.pop("repo", None)
    return module


mutants = _load_mutants()


def _run(code: int | None, output: str = "", seconds: float = 1.0) -> Any:
    return mutants.Run(code, seconds, output)


# verdicts ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status"),
    [
        (1, "killed"),
        (0, "SURVIVED"),
        (None, "ERROR"),  # timed out
        (2, "ERROR"),  # interrupted: a collection error
        (3, "ERROR"),  # pytest's internal error
        (4, "ERROR"),  # usage error
        (5, "ERROR"),  # no tests collected
        (-11, "ERROR"),  # a crash: killed by a signal
        (7, "ERROR"),  # no exit code pytest defines
    ],
)
def test_only_exit_code_1_kills_and_0_survives(code: int | None, status: str) -> None:
    got = mutants.verdict(_run(code, "some output\nlast line of pytest"), "pkg/mod.py")
    assert got.status == status
    if status == "ERROR":  # says why, and shows the end of pytest's output
        assert got.why.splitlines()[-1] == "last line of pytest"
        expected = "timed out" if code is None else f"pytest exit {code}"
        assert got.why.startswith(expected)
    else:
        assert got.why == ""


def test_an_errors_detail_is_the_tail_of_pytests_output() -> None:
    output = "\n".join(f"line {i}" for i in range(100))
    why = mutants.verdict(_run(2, output), "pkg/mod.py").why
    assert why.splitlines()[1:] == [f"line {i}" for i in range(100 - mutants.TAIL_LINES, 100)]


@pytest.mark.parametrize("code", [1, 2])
@pytest.mark.parametrize(
    "frame",
    [
        "/site/pkg/mod.py:12: in <module>",  # pytest's short traceback
        'File "/site/pkg/mod.py", line 12, in <module>',  # Python's, from a fresh interpreter
    ],
)
def test_a_mutant_that_breaks_its_modules_import_is_an_error(code: int, frame: str) -> None:
    output = f"tests/test_x.py:3: in test_x\n    import pkg.mod\n{frame}\nE   NameError: x"
    got = mutants.verdict(_run(code, output), "pkg/mod.py")
    assert got.status == "ERROR"
    assert got.why.startswith(f"the mutated pkg/mod.py raises when imported (pytest exit {code})")


def test_a_failure_inside_the_modules_functions_is_a_kill() -> None:
    output = (
        "tests/test_x.py:3: in test_x\n    f()\n/site/pkg/mod.py:12: in f\n"
        # another module's import failing in that test does not excuse the mutant
        '  File "/site/pkg/other.py", line 1, in <module>\nE   AssertionError'
    )
    assert mutants.verdict(_run(1, output), "pkg/mod.py").status == "killed"


def test_a_file_that_fails_to_collect_is_an_error_though_pytest_exits_1() -> None:
    """Under -x, pytest exits 1 for a collection error as for a failed test; the short
    summary names a file (no ``::``) for the first, a test for a failure or a setup error."""
    summary = "=== short test summary info ===\n{}\n!!! stopping after 1 failures !!!"
    for line in ("ERROR tests/test_x.py", "ERROR tests/test_x.py - TypeError: bad"):
        got = mutants.verdict(_run(1, summary.format(line)), "pkg/mod.py")
        assert got.status == "ERROR", line
        assert got.why.startswith("a test file failed to collect (pytest exit 1 under -x)")
    for line in ("FAILED tests/test_x.py::test_a - AssertionError",
                 "ERROR tests/test_x.py::test_a - ValueError: in a fixture"):  # fmt: skip
        assert mutants.verdict(_run(1, summary.format(line)), "pkg/mod.py").status == "killed"


def test_a_timeout_is_a_run_without_an_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    def hang(command: list[str], **kwargs: Any) -> Any:
        assert kwargs["timeout"] == 7.0
        raise subprocess.TimeoutExpired(command, 7.0, output=b"collected 3 items\n..")

    monkeypatch.setattr(mutants.subprocess, "run", hang)
    run = mutants.run_tests(("tests/test_x.py",), 7.0)
    assert run.code is None
    assert run.output == "collected 3 items\n.."
    assert mutants.verdict(run, "pkg/mod.py").status == "ERROR"


def test_a_run_reports_pytests_exit_code_and_both_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def fake(command: list[str], **kwargs: Any) -> Any:
        calls.append(command)
        return subprocess.CompletedProcess(command, 5, stdout="out\n", stderr="err\n")

    monkeypatch.setattr(mutants.subprocess, "run", fake)
    run = mutants.run_tests(("a.py", "b.py"), 60.0)
    assert (run.code, run.output) == (5, "out\nerr\n")
    (command,) = calls
    assert command[1:4] == ["-m", "pytest", "-x"]
    assert "--tb=short" in command  # raised_at_import reads short frames
    assert "-rfE" in command  # collection_failed reads the short summary
    assert command[-2:] == ["a.py", "b.py"]


# the set-literal edit ---------------------------------------------------------------------


def test_each_member_of_a_set_literal_is_dropped_by_one_mutant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = tmp_path / "ops.py"
    module.write_text('OPS = frozenset({"relu", "conv", "linear"})\n')
    monkeypatch.setattr(mutants, "installed", lambda name: module)
    target = mutants.Target("ops", "pkg/ops.py", ())
    found = {m.kind: m for m in mutants.mutants_of(target)}
    assert set(found) == {"drop 'relu'", "drop 'conv'", "drop 'linear'"}
    namespace: dict[str, Any] = {}
    exec(mutants.mutated_text(found["drop 'conv'"]), namespace)
    assert namespace["OPS"] == frozenset({"relu", "linear"})


# end to end: a tiny package, its tests, real pytest runs ----------------------------------

TINY = '''
LIMIT = 3
if LIMIT > 4:
    raise RuntimeError("LIMIT is too large")


def double(x):
    return x * 2


def clamp(x):
    return min(x, LIMIT)
'''

TESTS = '''
def test_double():
    from tiny.mod import double  # imported here: collection never fails
    assert double(3) == 6


def test_clamp_runs():
    from tiny.mod import clamp
    clamp(2)  # checks nothing: every mutant of clamp survives
'''


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Any]]:
    """``tiny/mod.py`` installed on the path of the fresh interpreters, and its target."""
    package = tmp_path / "site" / "tiny"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text(TINY)
    tests = tmp_path / "tests" / "test_tiny.py"
    tests.parent.mkdir()
    tests.write_text(TESTS)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # a bare pytest starts faster
    monkeypatch.setattr(mutants, "installed", lambda name: tmp_path / "site" / name)
    yield package / "mod.py", mutants.Target("tiny", "tiny/mod.py", (str(tests),))


def _mutant(target: Any, kind: str, where: str) -> Any:
    (found,) = [m for m in mutants.mutants_of(target) if (m.kind, m.where) == (kind, where)]
    return found


def test_real_runs_kill_spare_and_error_and_restore_the_module(tiny: tuple[Path, Any]) -> None:
    module, target = tiny
    original = module.read_bytes()
    killed = mutants.try_mutant(_mutant(target, "Mult->Div", "double"), 120.0)
    assert (killed.status, killed.why) == ("killed", "")
    spared = mutants.try_mutant(_mutant(target, "3->4", "<module>"), 120.0)  # LIMIT = 4
    assert spared.status == "SURVIVED"
    # `not LIMIT > 4`: the module raises at import; the tests fail (exit 1), but only
    # because nothing imports: an error, not a kill
    broken = mutants.try_mutant(_mutant(target, "negate-condition", "<module>"), 120.0)
    assert broken.status == "ERROR"
    assert broken.why.startswith("the mutated tiny/mod.py raises when imported (pytest exit 1)")
    assert "RuntimeError: LIMIT is too large" in broken.why
    assert module.read_bytes() == original


def test_the_modules_bytecode_is_forgotten_in_both_places(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Next to the module, and under the pycache prefix (tox's envs set one): a mutant's
    bytecode must not outlive it, nor the original's run in its place."""
    module = tmp_path / "pkg" / "mod.py"
    module.parent.mkdir()
    module.write_text("X = 1\n")
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "prefix"))
    beside = module.parent / "__pycache__" / "mod.cpython-311.pyc"
    prefixed = Path(importlib.util.cache_from_source(str(module)))
    assert prefixed.is_relative_to(tmp_path / "prefix")
    kept = module.parent / "__pycache__" / "other.cpython-311.pyc"
    for pyc in (beside, prefixed, kept):
        pyc.parent.mkdir(parents=True, exist_ok=True)
        pyc.write_bytes(b"")
    mutants._forget_bytecode(module)
    assert (beside.exists(), prefixed.exists(), kept.exists()) == (False, False, True)


# the run as a whole -----------------------------------------------------------------------

CONFIG = """
[[target]]
name = "alpha"
module = "pkg/alpha.py"
tests = ["tests/test_shared.py"]

[[target]]
name = "beta"
module = "pkg/beta.py"
tests = ["tests/test_shared.py"]

[[target]]
name = "gamma"
module = "pkg/gamma.py"
tests = ["tests/test_gamma.py"]
"""


@pytest.fixture
def fake_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Three targets (two sharing a test list), each module one multiplication (one
    mutant each); every pytest run faked: ``codes[tests]`` is the exit code of the
    baseline and then of each mutant run of that list, in turn."""
    for name in ("alpha", "beta", "gamma"):
        (tmp_path / f"{name}.py").write_text("def f(x, y):\n    return x * y\n")
    (tmp_path / "mutants.toml").write_text(CONFIG)
    monkeypatch.setattr(mutants, "CONFIG", tmp_path / "mutants.toml")
    monkeypatch.setattr(mutants, "EQUIVALENT", tmp_path / "none.toml")
    monkeypatch.setattr(mutants, "installed", lambda name: tmp_path / Path(name).name)
    state: dict[str, Any] = {"codes": {}, "runs": []}

    def run_tests(tests: tuple[str, ...], timeout: float) -> Any:
        state["runs"].append(tests)
        return _run(state["codes"][tests].pop(0), "the output of pytest")

    monkeypatch.setattr(mutants, "run_tests", run_tests)
    return state


SHARED, GAMMA = ("tests/test_shared.py",), ("tests/test_gamma.py",)
BOTH = SHARED + GAMMA  # the baseline: every picked target's tests, once, in one process


def test_the_baseline_runs_every_test_file_once_in_one_run_then_every_mutant(
    fake_repo: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    fake_repo["codes"] = {BOTH: [0], SHARED: [1, 1], GAMMA: [1]}
    assert mutants.main(["--all", "--seed", "s"]) == 0
    assert fake_repo["runs"] == [BOTH, SHARED, SHARED, GAMMA]  # 1 baseline, 3 mutants
    out = capsys.readouterr().out
    assert "baseline alpha, beta, gamma: green" in out
    assert "mutation score: 3/3 killed, 0 survived, 0 errors" in out


@pytest.mark.parametrize(
    ("gamma", "summary"),
    [
        (0, "2/3 killed, 1 survived, 0 errors"),
        (None, "2/3 killed, 0 survived, 1 errors"),
        (2, "2/3 killed, 0 survived, 1 errors"),
        (5, "2/3 killed, 0 survived, 1 errors"),
    ],
)
def test_a_survivor_or_an_error_fails_the_run(
    fake_repo: dict[str, Any], capsys: pytest.CaptureFixture[str], gamma: int | None, summary: str
) -> None:
    fake_repo["codes"] = {BOTH: [0], SHARED: [1, 1], GAMMA: [gamma]}
    assert mutants.main(["--all", "--seed", "s"]) == 1
    out = capsys.readouterr().out
    assert f"mutation score: {summary}" in out
    kind = "survivor" if gamma == 0 else "error (not a kill"
    assert kind in out
    assert "pkg/gamma.py::f::Mult->Div::x * y" in out


@pytest.mark.parametrize("baseline", [1, 2, None])
def test_a_failing_baseline_is_an_error_and_no_mutant_runs(
    fake_repo: dict[str, Any], capsys: pytest.CaptureFixture[str], baseline: int | None
) -> None:
    fake_repo["codes"] = {BOTH: [baseline]}
    assert mutants.main(["--all", "--seed", "s"]) == 1
    assert fake_repo["runs"] == [BOTH]
    out = capsys.readouterr().out
    assert "ERROR baseline alpha, beta, gamma" in out and "the output of pytest" in out
    assert "mutation score" not in out


def _junit(path: Path, cases: dict[str, str]) -> Path:
    """A JUnit report of one test per classname, with that outcome (passed, failure,
    error or skipped)."""
    body = "".join(
        f'<testcase classname="{name}" name="t">'
        + ("" if outcome == "passed" else f"<{outcome} message='m'/>")
        + "</testcase>"
        for name, outcome in cases.items()
    )
    path.write_text(f'<testsuites><testsuite name="pytest">{body}</testsuite></testsuites>')
    return path


@pytest.mark.parametrize("gamma_class", ["tests.test_gamma", "tests.test_gamma.TestClass"])
def test_a_report_where_every_picked_file_passed_is_the_baseline(
    fake_repo: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path, gamma_class: str
) -> None:
    report = _junit(
        tmp_path / "env.xml",
        {"tests.test_shared": "passed", gamma_class: "passed", "tests.test_shared_more": "failure"},
    )
    fake_repo["codes"] = {SHARED: [1, 1], GAMMA: [1]}
    assert mutants.main(["--all", "--baseline-report", str(report)]) == 0
    assert fake_repo["runs"] == [SHARED, SHARED, GAMMA]  # no baseline run of its own
    assert "baseline alpha, beta, gamma: green in env.xml" in capsys.readouterr().out


@pytest.mark.parametrize("outcome", ["failure", "error"])
def test_a_picked_file_that_failed_in_the_report_is_an_error_and_no_mutant_runs(
    fake_repo: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path, outcome: str
) -> None:
    report = _junit(tmp_path / "env.xml", {"tests.test_shared": "passed", "tests.test_gamma": outcome})
    assert mutants.main(["--all", "--baseline-report", str(report)]) == 1
    assert fake_repo["runs"] == []
    out = capsys.readouterr().out
    assert "baseline: tests/test_gamma.py failed unmutated in env.xml" in out
    assert "mutation score" not in out


@pytest.mark.parametrize("gamma", [None, "skipped"])
def test_a_picked_file_the_report_did_not_pass_runs_unmutated_first(
    fake_repo: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path, gamma: str | None
) -> None:
    cases = {"tests.test_shared": "passed"} | ({"tests.test_gamma": gamma} if gamma else {})
    report = _junit(tmp_path / "env.xml", cases)
    fake_repo["codes"] = {SHARED: [1, 1], GAMMA: [0, 1]}
    assert mutants.main(["--all", "--baseline-report", str(report)]) == 0
    assert fake_repo["runs"] == [GAMMA, SHARED, SHARED, GAMMA]  # gamma's baseline first
    assert "env.xml did not pass tests/test_gamma.py" in capsys.readouterr().out
    fake_repo["codes"], fake_repo["runs"] = {GAMMA: [1]}, []
    assert mutants.main(["--all", "--baseline-report", str(report)]) == 1
    assert fake_repo["runs"] == [GAMMA]


def test_a_missing_report_is_an_error(
    fake_repo: dict[str, Any], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert mutants.main(["--all", "--baseline-report", str(tmp_path / "none.xml")]) == 1
    assert fake_repo["runs"] == []
    assert "no JUnit report at" in capsys.readouterr().out


def test_targets_are_chosen_by_pattern_and_a_pattern_must_match(
    fake_repo: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    fake_repo["codes"] = {SHARED: [0, 1, 1]}
    assert mutants.main(["--all", "--target", "[ab]*"]) == 0
    assert "mutation score: 2/2 killed" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="no target matches delta"):
        mutants.main(["--all", "--target", "delta"])


def test_a_sample_is_fixed_by_its_seed(fake_repo: dict[str, Any]) -> None:
    candidates = [m for t in mutants.targets() for m in mutants.mutants_of(t)]
    picks = {seed: [m.ident for m in mutants.pick(candidates, 2, seed)] for seed in "abcdefgh"}
    assert picks["a"] == [m.ident for m in mutants.pick(candidates, 2, "a")]
    assert len({tuple(p) for p in picks.values()}) > 1  # the seed matters


# MUTANTS.md agrees with mutants_equivalent.toml -------------------------------------------

MUTANTS_MD = CI / "MUTANTS.md"


def _tables(text: str) -> Iterator[tuple[list[str], list[list[str]]]]:
    """(header, rows) of every markdown table in ``text``."""
    block: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            block.append([c.strip() for c in line.strip().strip("|").split("|")])
        elif block:
            yield block[0], [r for r in block[2:]]
            block = []


def _leading_int(cell: str) -> int:
    found = re.match(r"\d+", cell)
    assert found, f"no count in {cell!r}"
    return int(found.group())


def test_mutants_md_counts_the_listed_equivalents_per_module() -> None:
    listed = tomllib.loads((CI / "mutants_equivalent.toml").read_text())["equivalent"]
    by_module = Counter(e["mutant"].split("::", 1)[0] for e in listed)
    text = MUTANTS_MD.read_text()
    (rows,) = [rows for header, rows in _tables(text) if header[:2] == ["module", "listed"]]
    table = {row[0].strip("`"): int(row[1]) for row in rows if row[0] != "total"}
    (total,) = [int(row[1]) for row in rows if row[0] == "total"]
    assert table == dict(by_module)
    assert total == len(listed)
    # and every sentence that counts them now
    claims = [int(n) for n in re.findall(r"`mutants_equivalent.toml` lists (\d+)", text)]
    assert claims and set(claims) == {len(listed)}


def test_every_score_row_adds_up_to_its_sample() -> None:
    rows_checked = 0
    for header, rows in _tables(MUTANTS_MD.read_text()):
        if "sample" not in header:
            continue
        columns = {name: header.index(name) for name in ("sample", "killed", "survived", "errors")}
        for row in rows:
            parts = [_leading_int(row[columns[n]]) for n in ("killed", "survived", "errors")]
            assert sum(parts) == _leading_int(row[columns["sample"]]), row
            rows_checked += 1
    assert rows_checked >= 3


def test_the_md_table_parser_reads_what_a_person_reads() -> None:
    text = "x\n| a | b |\n|---|---|\n| 1 | 2 |\n| 3 | 4 |\n\n| c |\n|---|\n| 5 |\n"
    assert list(_tables(text)) == [(["a", "b"], [["1", "2"], ["3", "4"]]), (["c"], [["5"]])]



# where CI runs the sample ---------------------------------------------------------------


def ci_samples() -> dict[str, tuple[list[str], list[str]]]:
    """env -> (the --target patterns of CI's sample in it, the folders its pytest run
    covers), for every env ``.ci/sample_mutants`` samples."""
    repo = mutants.repo
    envs = repo.tox_envs()
    return {
        name: (re.findall(r"--target (\S+)", " ".join(args)), envs[name].set_env["QTESTS"].split())
        for name, args in repo.mutation_samples().items()
    }


def test_ci_runs_each_sample_after_the_command_in_its_env_on_that_runs_report() -> None:
    """``.ci/run`` runs the README's command, then ``.ci/sample_mutants`` for each sampled
    env, which runs ``mutants.py`` in that env (``tox exec``) with the env's JUnit report
    as the baseline; the hosted workflow's job for the env does the same after its run."""
    run = (ROOT / ".ci" / "run").read_text()
    command = run.index("python -m tox run-parallel")
    loop = re.search(r"^for env in ([\w ]+); do\n\s+echo.*\n\s+\.ci/sample_mutants \"\$env\"", run, re.M)
    assert loop is not None and loop.start() > command
    assert loop[1].split() == list(mutants.repo.mutation_samples())
    script = (ROOT / ".ci" / "sample_mutants").read_text()
    assert 'tox exec -e "$1" -- python .ci/mutants.py --seed ci --baseline-report ".tox/results/$1.xml"' in script
    workflow = (ROOT / ".github" / "workflows" / "ci.yml").read_text()
    for env in mutants.repo.mutation_samples():
        assert f"      - run: python -m tox run -e {env}\n      - run: .ci/sample_mutants {env}\n" in workflow


def test_ci_samples_every_target_after_the_run_of_all_its_tests() -> None:
    samples = ci_samples()
    assert set(samples) == {"qcore", "x86"}
    for target in mutants.targets():
        envs = [e for e, (patterns, _) in samples.items() if any(fnmatch.fnmatchcase(target.name, p) for p in patterns)]
        assert len(envs) == 1, (target.name, envs)
        (env,) = envs
        folders = samples[env][1]
        assert all(any(t.startswith(f.rstrip("/") + "/") for f in folders) for t in target.tests), (env, target)


def test_a_run_compiles_in_an_inductor_cache_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a cache directory in the environment, the run's test processes get a new
    one (two samples on one machine once shared the default and a baseline failed); one
    the environment names (tox's, per env) is kept."""
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    first = mutants.own_inductor_cache()
    assert Path(first).is_dir() and not any(Path(first).iterdir())
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == first
    assert mutants.own_inductor_cache() == first  # (the run's, from then on)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/somewhere/tox/set")
    assert mutants.own_inductor_cache() == "/somewhere/tox/set"
