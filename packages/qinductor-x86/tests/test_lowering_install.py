"""The lowering installs scoped: importing changes nothing, installing chains with the
user's own Inductor passes and is idempotent, uninstalling restores exactly."""

from __future__ import annotations

from collections.abc import Iterator

import lowering_zoo as zoo
import pytest
import torch
import torch._inductor.config as inductor_config
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

import qcore
from qcore.plugin_api import Lowering

#: Every Inductor hook that takes custom graph passes.
ALL_HOOKS = (
    "pre_grad_custom_pass",
    "joint_custom_pre_pass",
    "joint_custom_post_pass",
    "post_grad_custom_pre_pass",
    "post_grad_custom_post_pass",
)


class CountingPass(CustomGraphPass):
    """A user's own pass: counts the graphs it sees."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, graph: torch.fx.Graph) -> None:
        self.calls += 1

    def uuid(self) -> bytes:
        return get_hash_for_files((__file__,))


@pytest.fixture
def hooks() -> Iterator[dict[str, object]]:
    """The hooks as the test leaves them must be as it found them."""
    saved = {name: getattr(inductor_config, name) for name in ALL_HOOKS}
    yield saved
    qcore.get_lowering("x86").uninstall()
    for name, value in saved.items():
        setattr(inductor_config, name, value)


def _hook_values() -> dict[str, object]:
    return {name: getattr(inductor_config, name) for name in ALL_HOOKS}


def test_importing_and_getting_the_lowering_changes_no_inductor_hook(
    import_census: dict[str, object],
) -> None:
    """In a fresh interpreter: importing the package, its plugin and its lowering, and
    ``qcore.get_lowering("x86")``, change no hook (conftest.py's census)."""
    assert import_census["lowering"] == []


def test_get_lowering_returns_a_lowering() -> None:
    lowering = qcore.get_lowering("x86")
    assert isinstance(lowering, Lowering)
    assert qcore.get_lowering("x86") is lowering  # one per process: installing is shared


def test_install_chains_after_the_users_passes_and_uninstall_restores_them(
    hooks: dict[str, object],
) -> None:
    single, listed = CountingPass(), [CountingPass()]
    inductor_config.pre_grad_custom_pass = single
    inductor_config.joint_custom_pre_pass = listed
    inductor_config.post_grad_custom_post_pass = None
    before = _hook_values()
    lowering = qcore.get_lowering("x86")

    lowering.install()
    installed = _hook_values()
    assert installed["pre_grad_custom_pass"][0] is single  # type: ignore[index]
    assert installed["joint_custom_pre_pass"][0] is listed[0]  # type: ignore[index]
    for name in ("pre_grad_custom_pass", "joint_custom_pre_pass", "post_grad_custom_post_pass"):
        value = installed[name]
        assert isinstance(value, list) and len(value) == (1 if before[name] is None else 2)
        assert isinstance(value[-1], CustomGraphPass) and value[-1].uuid()
    assert installed["joint_custom_post_pass"] is before["joint_custom_post_pass"]

    lowering.install()  # a second install changes nothing
    assert _hook_values() == installed

    lowering.uninstall()
    after = _hook_values()
    assert all(after[name] is before[name] for name in ALL_HOOKS)
    lowering.uninstall()  # and so does a second uninstall
    assert _hook_values() == after


def test_uninstall_leaves_a_hook_someone_else_replaced(hooks: dict[str, object]) -> None:
    # what importing torchao's x86 quantizer does to pre_grad_custom_pass
    lowering = qcore.get_lowering("x86")
    lowering.install()
    theirs = CountingPass()
    inductor_config.pre_grad_custom_pass = theirs
    appended = CountingPass()
    inductor_config.joint_custom_pre_pass = [*inductor_config.joint_custom_pre_pass, appended]
    lowering.uninstall()
    assert inductor_config.pre_grad_custom_pass is theirs
    assert inductor_config.joint_custom_pre_pass == [appended]


def test_context_manager_installs_for_the_block_and_keeps_an_explicit_install(
    hooks: dict[str, object],
) -> None:
    lowering = qcore.get_lowering("x86")
    before = _hook_values()
    with lowering as entered:
        assert entered is lowering and lowering.installed  # type: ignore[attr-defined]
        with lowering:
            assert lowering.installed  # type: ignore[attr-defined]
        assert lowering.installed  # type: ignore[attr-defined]
    assert not lowering.installed  # type: ignore[attr-defined]
    assert _hook_values() == before

    lowering.install()
    with lowering:
        pass
    assert lowering.installed  # type: ignore[attr-defined]


def test_the_users_passes_still_run_during_a_lowered_compile(hooks: dict[str, object]) -> None:
    users = CountingPass()
    inductor_config.joint_custom_pre_pass = users
    model = zoo.MLP()
    inputs = (zoo.example(4, 32),)
    converted = zoo.quantize(model, inputs, "x86")
    lowering = qcore.get_lowering("x86")
    with zoo.fresh_compile(), lowering:
        _, code = zoo.compile_and_run(converted, inputs)
    assert users.calls == 1
    assert zoo.int8_kernel_calls(code)
    assert lowering.report().int8_kernels == len(zoo.int8_kernel_calls(code))
    assert inductor_config.joint_custom_pre_pass is users


@pytest.mark.parametrize(
    ("module", "name"),
    [("torch._inductor.fx_passes.post_grad", "view_to_reshape"),
     ("torch._inductor.freezing_utils", "maybe_set_is_frozen_param")],
)  # fmt: skip
def test_a_torch_the_adapter_does_not_know_is_one_line_naming_the_range(
    hooks: dict[str, object], monkeypatch: pytest.MonkeyPatch, module: str, name: str
) -> None:
    """A release that moved a private API the lowering needs fails at install, in one line
    that names the torch, what it lacks and the range the distribution declares (read here
    from its pyproject.toml), and installs nothing; never an AttributeError in a compile."""
    import importlib
    import tomllib
    from importlib import metadata

    from packaging.requirements import Requirement

    from qcore.errors import UnsupportedTorchError

    pyproject = tomllib.loads((zoo.HERE.parent / "pyproject.toml").read_text())
    (declared,) = [Requirement(r) for r in pyproject["project"]["dependencies"] if Requirement(r).name == "torch"]
    monkeypatch.delattr(importlib.import_module(module), name)
    lowering = qcore.get_lowering("x86")
    with pytest.raises(UnsupportedTorchError) as raised:
        lowering.install()
    message = str(raised.value)
    assert "\n" not in message
    assert f"on torch {metadata.version('torch')}" in message
    assert f"lacks {module}.{name}" in message
    (stated,) = [r for r in message.split() if r.startswith("torch") and "<" in r]
    assert Requirement(stated).specifier == declared.specifier, message
    assert not lowering.installed
    assert _hook_values() == hooks
