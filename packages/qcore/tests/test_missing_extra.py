"""An install without an extra's packages meets one error that names the extra.

torchao is qcore-torch's ``pt2e`` extra, and ``pip install qbackend-onednn`` brings
qcore-torch without it. Each test runs a fresh interpreter in which the missing modules
are blocked (``sys.modules[name] = None``, Python's own way to make an import fail as if
the module were not installed), against fake plugin distributions.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import qcore
from qcore.testing.fresh import Outcome, run_fresh
from qcore.zoo.suite.fakes import FakeDist, one_plugin

from .test_plugins import GOOD_BACKEND

NEEDS_TORCHAO = (
    "needs torchao, which qcore-torch's 'pt2e' extra installs: pip install 'qcore-torch[pt2e]'"
)
HINT = "hint: install the extra with the command above, then rerun"

# A backend with a QConfigMapping, so that a PT2E quantizer is derived from it.
MAPPED_BACKEND = GOOD_BACKEND.replace(
    'PLUGIN = BackendPlugin(name="tiny", backend_config=_config, reference_convert=True)',
    """
def _mapping(is_qat=False, model=None):
    from torch.ao.quantization import get_default_qconfig_mapping
    return get_default_qconfig_mapping("x86")

PLUGIN = BackendPlugin(name="tiny", backend_config=_config, qconfig_mapping=_mapping,
                       reference_convert=True)
""",
)
# A quantizer plugin whose factory needs torchao, as every quantizer's does.
QUANTIZER = """
from qcore.plugin_api import QuantizerPlugin

PLUGIN = QuantizerPlugin(name="chipq", factory="qchipq_extra.quantizer:make")
"""
QUANTIZER_FACTORY = """
from torchao.quantization.pt2e.quantizer import Quantizer

def make():
    raise AssertionError("the factory ran without torchao")
"""


def _install_fx_only(fake_dist: FakeDist) -> Path:
    return one_plugin(fake_dist, "qbackend-tiny", "tiny", "qtiny_extra.plugin", MAPPED_BACKEND)


def _install_quantizer(fake_dist: FakeDist) -> Path:
    return fake_dist(
        "qquantizer-chipq",
        {"qcore.quantizers": {"chipq": "qchipq_extra.plugin:PLUGIN"}},
        {"qchipq_extra.plugin": QUANTIZER, "qchipq_extra.quantizer": QUANTIZER_FACTORY},
    )


def _only_fakes_enabled(fakes: Sequence[str]) -> str:
    """``QCORE_DISABLE_PLUGINS`` for every installed plugin but the fake distributions'
    (the first-party ones, where installed, would make the run check them too)."""
    return ",".join(
        f"{p.kind}:{p.name}" for p in qcore.list_plugins() if p.distribution not in fakes
    )


def _fresh(
    source: str,
    *,
    blocked: Sequence[str],
    paths: Sequence[Path] = (),
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> Outcome:
    """``source`` in a fresh interpreter where ``blocked`` modules cannot be imported and
    ``paths`` (fake distributions, fake modules) come first on ``sys.path``."""
    prelude = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in blocked)
    pythonpath = os.pathsep.join([*map(str, paths), *sys.path])
    return run_fresh(
        prelude + source, args=args, env={"PYTHONPATH": pythonpath, **(env or {})}, timeout=300
    )


def _qcore(*args: str, blocked: Sequence[str], paths: Sequence[Path] = (),
           env: dict[str, str] | None = None) -> Outcome:  # fmt: skip
    """The ``qcore`` command (its console script calls ``main``), with ``blocked`` absent."""
    source = "from qcore.cli import main\nraise SystemExit(main(sys.argv[1:]))\n"
    return _fresh(source, blocked=blocked, paths=paths, args=args, env=env)


#: Each command of ``sys.argv[1:]`` (JSON lists), as the console script runs it, in turn:
#: its exit status and what it printed.
_COMMANDS = """
import contextlib, io, json
from qcore.cli import main
import qcore.testing.fresh as fresh
ran = []
for argv in map(json.loads, sys.argv[1:]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    ran.append([code, out.getvalue(), err.getvalue()])
fresh.emit(ran)
"""


def _qcore_runs(*commands: Sequence[str], blocked: Sequence[str], paths: Sequence[Path] = ()) -> list[Outcome]:
    """Several ``qcore`` commands, one after the other in one fresh interpreter where
    ``blocked`` is absent (each an :class:`Outcome` of its exit status and output)."""
    outcome = _fresh(_COMMANDS, blocked=blocked, paths=paths, args=[json.dumps(list(c)) for c in commands])
    assert outcome.ok, outcome.describe()
    return [Outcome(code, out, err) for code, out, err in outcome.result()]


# the public API ----------------------------------------------------------------------

API_CALLS = """
import pickle
import torch
import qcore
import qcore.testing
import qcore.testing.fresh as fresh
from qcore.demo.flows import discover_flows

def raised(call):
    try:
        call()
    except Exception as exc:
        return {"type": type(exc).__name__, "message": str(exc),
                "import_error": isinstance(exc, ImportError),
                "plugin_error": isinstance(exc, qcore.PluginError),
                "name": getattr(exc, "name", None), "extra": getattr(exc, "extra", None)}
    return None

error = raised(lambda: qcore.get_quantizer("tiny"))
demo_flow = next(f for f in discover_flows() if f.plugin == "chipq")
copied = pickle.loads(pickle.dumps(qcore.MissingExtraError("a", "b", "c", "d")))
fresh.emit({
    "derived": error,
    "plugin": raised(lambda: qcore.get_quantizer("chipq")),
    "typo": raised(lambda: qcore.get_quantizer("chipz")),
    "explain": raised(lambda: qcore.explain_not_quantized(torch.nn.Linear(2, 2), None)),
    "check": raised(lambda: qcore.testing.check_quantizer("tiny")),
    "conformant": raised(lambda: qcore.testing.assert_conformant("quantizer", "chipq")),
    "demo": raised(lambda: demo_flow.quantize(torch.nn.Linear(2, 2), [torch.randn(1, 2)], False)),
    "backend_patterns": len(qcore.get_backend_config("tiny").configs),
    "pickled": [str(copied), copied.entry, copied.need, copied.name, copied.extra],
})
"""


def test_every_pt2e_entry_point_names_the_extra_without_torchao(fake_dist: FakeDist) -> None:
    root = _install_fx_only(fake_dist)
    _install_quantizer(fake_dist)
    outcome = _fresh(API_CALLS, blocked=["torchao"], paths=[root])
    assert outcome.ok, outcome.describe()
    found = outcome.result()
    assert found["derived"] == {
        "type": "MissingExtraError",
        "message": f"qcore.get_quantizer('tiny') {NEEDS_TORCHAO}",
        "import_error": True,
        "plugin_error": True,
        "name": "torchao",
        "extra": "pt2e",
    }
    messages = {
        key: found[key]["message"] for key in ("plugin", "explain", "check", "conformant", "demo")
    }
    assert messages == {
        "plugin": f"qcore.get_quantizer('chipq') {NEEDS_TORCHAO}",
        "explain": f"qcore.explain_not_quantized {NEEDS_TORCHAO}",
        "check": f"qcore.testing.check_quantizer('tiny') {NEEDS_TORCHAO}",
        "conformant": f"qcore.testing.check_quantizer('chipq') {NEEDS_TORCHAO}",
        # a PluginError: the demo reports the flow as skipped, naming the extra
        "demo": f"qcore demo's PT2E chipq flow {NEEDS_TORCHAO}",
    }
    assert {found[key]["type"] for key in messages} == {"MissingExtraError"}
    # a mistyped name is still a typo, not a missing extra
    assert found["typo"]["type"] == "PluginNotFoundError"
    assert found["backend_patterns"] == 1  # FX keeps working
    assert found["pickled"] == ["a b", "a", "b", "c", "d"]


def test_import_qcore_and_qcore_list_import_no_torchao(fake_dist: FakeDist) -> None:
    root = _install_fx_only(fake_dist)
    source = """
import contextlib, io
import qcore
from qcore.cli import main
import qcore.testing.fresh as fresh
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = main(["list"])
fresh.emit([code, out.getvalue(), sorted(m for m in sys.modules if m.startswith("torchao"))])
"""
    outcome = _fresh(source, blocked=[], paths=[root])  # torchao installed, and never imported
    assert outcome.ok, outcome.describe()
    code, listed, torchao = outcome.result()
    assert code == 0 and torchao == []
    rows = {tuple(line.split()[:3]) for line in listed.splitlines()}
    assert {("backend", "tiny", "qbackend-tiny"), ("quantizer", "tiny", "qbackend-tiny")} <= rows


def test_a_torchao_without_the_pt2e_api_is_named_with_its_version(
    fake_dist: FakeDist, tmp_path: Path
) -> None:
    root = _install_fx_only(fake_dist)
    old = tmp_path / "old"  # a torchao from before the PT2E API moved into it
    (old / "torchao").mkdir(parents=True)
    (old / "torchao" / "__init__.py").write_text("")
    (old / "torchao-0.7.0.dist-info").mkdir()
    (old / "torchao-0.7.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: torchao\nVersion: 0.7.0\n"
    )
    broken = tmp_path / "broken"  # a torchao whose own dependency is missing
    (broken / "torchao").mkdir(parents=True)
    (broken / "torchao" / "__init__.py").write_text("import qcore_no_such_dependency\n")
    source = """
import qcore
import qcore.testing.fresh as fresh
try:
    qcore.get_quantizer("tiny")
except Exception as exc:
    fresh.emit([type(exc).__name__, str(exc)])
"""
    outcome = _fresh(source, blocked=[], paths=[old, root])
    assert outcome.ok, outcome.describe()
    assert outcome.result() == [
        "MissingExtraError",
        "qcore.get_quantizer('tiny') needs torchao.quantization.pt2e, which torchao 0.7.0 "
        "lacks and qcore-torch's 'pt2e' extra installs: pip install 'qcore-torch[pt2e]'",
    ]
    # torchao is there but broken: its own error says what is missing, not the extra
    outcome = _fresh(source, blocked=[], paths=[broken, root])
    assert outcome.ok, outcome.describe()
    assert outcome.result() == [
        "ModuleNotFoundError",
        "No module named 'qcore_no_such_dependency'",
    ]


# the qcore command -------------------------------------------------------------------


def test_show_and_check_of_a_quantizer_say_the_extra_in_one_line(fake_dist: FakeDist) -> None:
    root = _install_fx_only(fake_dist)
    show, check, backend = _qcore_runs(
        ["show", "quantizer:tiny"], ["check", "tiny", "quantizer:tiny"], ["show", "tiny"],
        blocked=["torchao"], paths=[root],
    )  # fmt: skip
    assert (show.returncode, show.stdout) == (2, "")
    assert show.stderr.splitlines() == [
        f"qcore: error: qcore show quantizer:tiny {NEEDS_TORCHAO}",
        HINT,
    ]
    # named, a quantizer needing the extra stops the command before any check runs
    assert (check.returncode, check.stdout) == (2, "")
    assert check.stderr.splitlines() == [
        f"qcore: error: qcore check quantizer:tiny {NEEDS_TORCHAO}",
        HINT,
    ]
    assert backend.returncode == 0, backend.describe()
    assert backend.stdout.startswith("backend tiny (qbackend-tiny 1.0): 1 patterns\n")


def test_check_on_an_fx_only_install_passes_and_says_what_it_skipped(
    fake_dist: FakeDist,
) -> None:
    root = _install_fx_only(fake_dist)
    env = {"QCORE_DISABLE_PLUGINS": _only_fakes_enabled(["qbackend-tiny"])}
    run = _qcore("check", blocked=["torchao"], paths=[root], env=env)
    assert run.returncode == 0, run.describe() + run.stdout
    lines = run.stdout.splitlines()
    assert re.fullmatch(r"backend:tiny: [1-9]\d* passed, 0 failed", lines[0]), lines
    assert lines[1:] == [
        f"SKIP quantizer:tiny (derived from backend tiny): {NEEDS_TORCHAO}",
        "checked 1 of 2; skipped 1 that need qcore-torch's 'pt2e' extra: "
        "pip install 'qcore-torch[pt2e]'",
    ]
    progress = [line for line in run.stderr.splitlines() if line.startswith("[")]
    assert progress[0] == "[1/2] backend:tiny ..."
    assert re.fullmatch(r"\[1/2\] backend:tiny passed in \d+\.\d s", progress[1])
    assert progress[2] == "[2/2] quantizer:tiny ..."
    assert re.fullmatch(r"\[2/2\] quantizer:tiny skipped in \d+\.\d s", progress[3])


def test_check_fails_an_installed_quantizer_plugin_without_torchao(fake_dist: FakeDist) -> None:
    root = _install_quantizer(fake_dist)
    env = {"QCORE_DISABLE_PLUGINS": _only_fakes_enabled(["qquantizer-chipq"])}
    run = _qcore("check", blocked=["torchao"], paths=[root], env=env)
    # its distribution requires torchao: an install without it is broken, not FX-only
    assert run.returncode == 1, run.describe()
    assert run.stdout.splitlines() == [
        f"FAIL quantizer:chipq (qquantizer-chipq 1.0 is installed): {NEEDS_TORCHAO}"
    ]


# qcore demo --------------------------------------------------------------------------

DEMO_MODULES = ["sklearn", "tqdm", "matplotlib"]


def _fake_modules(root: Path, sources: dict[str, str]) -> Path:
    for name, source in sources.items():
        path = root.joinpath(*name.split(".")).with_suffix(".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
    return root


def test_demo_names_its_extra_after_checking_its_paths(tmp_path: Path) -> None:
    json_path = str(tmp_path / "demo.json")
    bad_path, missing = _qcore_runs(
        ["demo", "--plot", str(tmp_path / "none" / "x.png")], ["demo", "--json", json_path],
        blocked=DEMO_MODULES,
    )  # fmt: skip
    assert bad_path.returncode == 2
    assert bad_path.stderr.splitlines()[0] == (
        f"qcore: error: --plot {tmp_path / 'none' / 'x.png'}: "
        f"directory {tmp_path / 'none'} does not exist"
    )
    assert (missing.returncode, missing.stdout) == (2, "")
    assert missing.stderr.splitlines() == [
        "qcore: error: qcore demo needs sklearn, which qcore-torch's 'demo' extra installs: "
        "pip install 'qcore-torch[demo]'",
        HINT,
    ]


def test_demo_needs_matplotlib_for_plot_only(tmp_path: Path) -> None:
    fakes = _fake_modules(
        tmp_path / "fakes",
        {
            "sklearn.__init__": "",
            # the demo's first piece of work: reaching it means every check has passed
            "sklearn.datasets": "def load_digits():\n    raise RuntimeError('the work started')\n",
            "tqdm.__init__": "",
        },
    )
    plot, no_plot = _qcore_runs(
        ["demo", "--plot", str(tmp_path / "demo.png")], ["demo", "--json", str(tmp_path / "demo.json")],
        blocked=["matplotlib"], paths=[fakes],
    )  # fmt: skip
    assert plot.returncode == 2
    assert plot.stderr.splitlines()[0] == (
        "qcore: error: qcore demo needs matplotlib, which qcore-torch's 'demo' extra "
        "installs: pip install 'qcore-torch[demo]'"
    )
    assert no_plot.returncode == 1
    assert no_plot.stderr.splitlines()[0] == "qcore: error: RuntimeError: the work started"
