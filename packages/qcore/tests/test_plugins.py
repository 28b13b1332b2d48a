"""Plugin discovery: laziness, failure isolation, conflicts, disabling, foreign qcore."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import qcore
from qcore.errors import ForeignQcoreError, PluginConflictError, PluginError, PluginNotFoundError
from qcore.plugins import REGISTRY

FakeDist = Callable[..., Path]

# A minimal valid backend a fake distribution can point at: one linear pattern.
GOOD_BACKEND = """
from qcore.plugin_api import BackendPlugin

def _config():
    import torch
    from torch.ao.quantization.backend_config import BackendConfig, BackendPatternConfig, DTypeConfig
    dtype = DTypeConfig(input_dtype=torch.quint8, output_dtype=torch.quint8)
    return BackendConfig("tiny").set_backend_pattern_config(
        BackendPatternConfig(torch.nn.ReLU).add_dtype_config(dtype))

PLUGIN = BackendPlugin(name="tiny", backend_config=_config)
"""


def statuses() -> dict[tuple[str, str, str], str]:
    return {(p.kind, p.name, p.distribution): p.status for p in qcore.list_plugins()}


def test_missing_module_is_isolated_and_names_the_distribution(fake_dist: FakeDist) -> None:
    fake_dist("qbackend-broken", {"qcore.backends": {"broken": "qbroken_missing.plugin:PLUGIN"}})
    fake_dist(
        "qbackend-tiny",
        {"qcore.backends": {"tiny": "qtiny_ok.plugin:PLUGIN"}},
        {"qtiny_ok.plugin": GOOD_BACKEND},
    )
    assert statuses()[("backend", "broken", "qbackend-broken")] == "available"

    with pytest.raises(PluginError, match=r"qbackend-broken 1\.0.*qbroken_missing") as info:
        qcore.get_backend_config("broken")
    assert "ModuleNotFoundError" in str(info.value)

    # the others keep working, before and after the failure
    assert len(qcore.get_backend_config("tiny").configs) == 1
    assert len(qcore.get_backend_config("onednn").configs) > 0
    rows = {(p.name, p.distribution): p for p in qcore.list_plugins()}
    assert rows[("broken", "qbackend-broken")].status == "error"
    assert "qbroken_missing" in rows[("broken", "qbackend-broken")].reason
    assert rows[("tiny", "qbackend-tiny")].status == "loaded"


def test_two_distributions_claiming_onednn_is_an_error_naming_both(fake_dist: FakeDist) -> None:
    fake_dist(
        "qbackend-impostor",
        {"qcore.backends": {"onednn": "qimpostor.plugin:PLUGIN"}},
        {"qimpostor.plugin": GOOD_BACKEND.replace('"tiny"', '"onednn"')},
    )
    with pytest.raises(PluginConflictError) as info:
        qcore.get_backend_config("onednn")
    assert "qbackend-onednn" in str(info.value) and "qbackend-impostor" in str(info.value)
    assert "qimpostor" not in sys.modules, "a conflict must not import either claimant"
    conflicted = {d: s for (k, n, d), s in statuses().items() if (k, n) == ("backend", "onednn")}
    assert conflicted == {"qbackend-onednn": "conflict", "qbackend-impostor": "conflict"}
    # unrelated plugins are unaffected
    assert len(qcore.get_backend_config("executorch").configs) > 0


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("PLUGIN = 42", r"is a int, expected a qcore\.plugin_api\.BackendPlugin"),
        (
            "from qcore.plugin_api import QuantizerPlugin\n"
            "PLUGIN = QuantizerPlugin(name='odd', factory=object)",
            r"is a QuantizerPlugin, expected a qcore\.plugin_api\.BackendPlugin",
        ),
        (
            GOOD_BACKEND.replace(
                "backend_config=_config", "backend_config=_config, api_version=99"
            ).replace('"tiny"', '"odd"'),
            r"targets plugin API version 99, this qcore provides version 1",
        ),
        (GOOD_BACKEND, r"descriptor is named 'tiny', but the entry point is named 'odd'"),
        (
            "from qcore.plugin_api import BackendPlugin\n"
            "PLUGIN = BackendPlugin(name='odd', backend_config=lambda: {'not': 'a config'})",
            r"returned a dict for its BackendConfig",
        ),
        (
            "from qcore.plugin_api import BackendPlugin\n"
            "def _boom(): raise RuntimeError('no such chip')\n"
            "PLUGIN = BackendPlugin(name='odd', backend_config=_boom)",
            r"failed to build its BackendConfig: RuntimeError: no such chip",
        ),
    ],
    ids=[
        "not-a-descriptor",
        "wrong-kind",
        "api-version",
        "name-mismatch",
        "wrong-return",
        "factory-raises",
    ],
)
def test_bad_plugins_are_reported_with_distribution_and_reason(
    fake_dist: FakeDist, source: str, expected: str
) -> None:
    fake_dist(
        "qbackend-odd", {"qcore.backends": {"odd": "qodd.plugin:PLUGIN"}}, {"qodd.plugin": source}
    )
    with pytest.raises(PluginError, match=expected) as info:
        qcore.get_backend_config("odd")
    assert "qbackend-odd 1.0" in str(info.value)
    row = next(p for p in qcore.list_plugins() if p.name == "odd")
    assert row.status == "error" and "qbackend-odd" in row.reason
    # the failure is remembered, not retried with a different outcome
    with pytest.raises(PluginError, match=expected):
        qcore.get_backend_config("odd")


def test_unknown_name_lists_known_names() -> None:
    REGISTRY.reset()
    with pytest.raises(
        PluginNotFoundError, match=r"no backend plugin named 'mychip' \(known: .*onednn"
    ):
        qcore.get_backend_config("mychip")


@pytest.mark.parametrize("spec", ["onednn", "backend:onednn", " xnnpack , onednn "])
def test_disable_by_environment(monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    monkeypatch.setenv("QCORE_DISABLE_PLUGINS", spec)
    REGISTRY.reset()
    assert statuses()[("backend", "onednn", "qbackend-onednn")] == "disabled"
    assert statuses()[("backend", "executorch", "qbackend-executorch")] == "available"
    with pytest.raises(PluginError, match="disabled by QCORE_DISABLE_PLUGINS"):
        qcore.get_backend_config("onednn")
    assert len(qcore.get_backend_config("executorch").configs) > 0


def test_foreign_qcore_distribution_is_named(fake_dist: FakeDist) -> None:
    # The unrelated PyPI "qcore": same distribution name, none of our marker entry points.
    fake_dist("qcore")
    with pytest.raises(ForeignQcoreError, match=r"unrelated PyPI library.*packages/qcore"):
        qcore.get_backend_config("onednn")
    row = next(p for p in qcore.list_plugins() if p.name == "onednn")
    assert row.status == "error" and "unrelated" in row.reason


def test_backend_extension_adds_patterns_and_conflicts_name_both(fake_dist: FakeDist) -> None:
    extension = """
import torch
from torch.ao.quantization.backend_config import BackendPatternConfig, DTypeConfig
from qcore.plugin_api import BackendExtension
dtype = DTypeConfig(input_dtype=torch.quint8, output_dtype=torch.quint8)
def _patterns():
    return [BackendPatternConfig(OP).add_dtype_config(dtype)]
EXT = BackendExtension(name="extra", target="executorch", patterns=_patterns)
"""
    base = len(qcore.get_backend_config("executorch").configs)
    fake_dist(
        "qext-new",
        {"qcore.backend_extensions": {"executorch.extra": "qext_new.ext:EXT"}},
        {"qext_new.ext": extension.replace("OP", "torch.nn.Mish")},
    )
    config = qcore.get_backend_config("executorch")
    assert len(config.configs) == base + 1
    assert any(c.pattern is __import__("torch").nn.Mish for c in config.configs)
    # extensions of other targets are not even imported
    assert len(qcore.get_backend_config("onednn").configs) > 0

    fake_dist(
        "qext-clash",
        {"qcore.backend_extensions": {"executorch.clash": "qext_clash.ext:EXT"}},
        {
            "qext_clash.ext": extension.replace("OP", "torch.nn.Linear").replace(
                'name="extra"', 'name="clash"'
            )
        },
    )
    with pytest.raises(PluginConflictError, match=r"qext-clash 1\.0.*qbackend-executorch"):
        qcore.get_backend_config("executorch")


def test_extension_entry_point_and_descriptor_must_agree_on_target(fake_dist: FakeDist) -> None:
    fake_dist(
        "qext-lost",
        {"qcore.backend_extensions": {"onednn.lost": "qext_lost.ext:EXT"}},
        {
            "qext_lost.ext": "from qcore.plugin_api import BackendExtension\n"
            "EXT = BackendExtension(name='lost', target='executorch', "
            "patterns=list)"
        },
    )
    with pytest.raises(PluginError, match=r"qext-lost.*target 'onednn'.*targets 'executorch'"):
        qcore.get_backend_config("onednn")


def test_import_qcore_and_list_import_no_plugin() -> None:
    code = (
        "import sys, qcore\n"
        "qcore.list_plugins()\n"
        "heavy = [m for m in sys.modules if m.startswith(('qbackend_', 'qquantizer_', "
        "'qinductor_', 'torchao', 'torch._inductor'))]\n"
        "print(heavy, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[] False"


def test_backend_lookup_imports_only_that_plugin() -> None:
    code = (
        "import sys, qcore\n"
        "qcore.get_backend_config('onednn')\n"
        "print(sorted(m for m in sys.modules if m.startswith(('qbackend_executorch', "
        "'qquantizer_', 'qinductor_', 'torchao', 'torch._inductor'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
