"""CONTRIBUTING.md's "To change X, edit these files" rows, tried: each test makes the
change a row describes, in the files that row names only, and checks that the rest of
the project picks it up with no other edit.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.ao.quantization.qconfig import qconfig_equals
from torch.fx import GraphModule, Node
from torchao.quantization.pt2e.quantizer import (
    QuantizationConfig,
    get_input_act_qspec,
    get_output_act_qspec,
)

from qcore.fx.patterns import pattern_config
from qcore.fx.patterns.text import pattern_text
from qcore.pt2e.annotation.claims import (
    Filter,
    Partitions,
    is_annotated,
    is_op,
    passes,
    set_annotation,
)
from qcore.pt2e.annotation.registry import ANNOTATORS, Annotator
from qcore.pt2e.derived.derived_quantizer import derived_quantizer
from qcore.testing import reference as kit
from qcore.testing.parity import compare_backend_configs
from qcore.zoo.suite.pt2e import annotate, differences, exported, quantizing

ROOT = Path(__file__).resolve().parents[1]
aten = torch.ops.aten
HARDSWISH = frozenset({aten.hardswish.default})


def _hardswish_model() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.Hardswish()).eval(), (torch.randn(2, 8),)


def _quantized_ops(quantizer: Any) -> dict[str, Any]:
    model, example = _hardswish_model()
    return quantizing(annotate(quantizer, exported(model, example)))


# "add a backend pattern (FX)": one row in the backend's config.py, beyond_torch() ---------


def test_one_backend_pattern_row_passes_parity_and_reaches_the_derived_quantizer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """nn.Hardswish, which torch 2.13's ExecuTorch config lacks, added as one row of
    ``qbackend_executorch.config.beyond_torch``: the parity check expects exactly that
    addition, and the backend's derived PT2E quantizer quantizes the op with no code."""
    from qbackend_executorch import config, mapping

    row = pattern_config(nn.Hardswish, config.OPS)
    monkeypatch.setattr(config, "beyond_torch", lambda: [row])
    torchs = kit.torch_backend_config("executorch")
    ours = config.build_backend_config()
    assert compare_backend_configs(ours, torchs) == kit.added_lines([row])
    assert len(ours.configs) == len(torchs.configs) + 1

    def derived(name: str) -> Any:  # a name of its own: a derived class is built once
        return derived_quantizer(
            name, "tests", config.build_backend_config, mapping.build_qconfig_mapping,
            pattern_text,
        )  # fmt: skip

    with_row = _quantized_ops(derived("executorch-and-one-row"))
    hardswish = next(name for name in with_row if "hardswish" in name)
    assert "output" in with_row[hardswish]
    monkeypatch.setattr(config, "beyond_torch", lambda: [])
    without = _quantized_ops(derived("executorch-as-torch"))
    assert not any("hardswish" in name for name in without)


def test_a_pattern_for_an_op_without_an_example_names_the_example_table_until_it_has_a_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """torch.cumsum, an op no row of ``OP_EXAMPLES`` covers, as a row of ``beyond_torch``:
    the backend kit's model and the derived quantizer's example both fail naming the op
    and that table; one row there (its ``dim``) and both run it, the derived quantizer
    observing its output."""
    from torch.ao.quantization.backend_config import BackendConfig

    import qcore
    from qbackend_executorch import config, mapping
    from qcore.fx.patterns import examples
    from qcore.testing.backend_checks import check_backend_config

    monkeypatch.setattr(config, "beyond_torch", lambda: [pattern_config(torch.cumsum, config.OPS)])
    added = [c for c in config.build_backend_config().configs if c.pattern is torch.cumsum]
    quantizer = derived_quantizer(
        "executorch-and-a-new-op", "tests", config.build_backend_config,
        mapping.build_qconfig_mapping, pattern_text,
    )  # fmt: skip
    (annotator,) = [a for a in quantizer.annotators() if "cumsum" in a.name]
    assert annotator.example is not None

    def kit_says() -> tuple[bool, str]:
        results = check_backend_config(
            BackendConfig("added").set_backend_pattern_configs(added),
            lambda model, is_qat: qcore.get_qconfig_mapping(
                "executorch", is_qat=is_qat, model=model
            ),
        )
        (result,) = [r for r in results if r.check == "prepare-convert"]
        return result.ok, result.detail

    says = (
        "no example for op torch.cumsum: add its row to qcore.fx.patterns.examples.OP_EXAMPLES "
        "(packages/qcore/src/qcore/fx/patterns/examples.py)"
    )
    assert kit_says() == (False, f"not synthesizable: {says}")
    with pytest.raises(examples.NoExampleError) as raised:
        annotator.example()
    assert str(raised.value) == says

    monkeypatch.setitem(examples.OP_EXAMPLES, torch.cumsum, examples.OpExample(args=(1,)))
    ok, detail = kit_says()
    assert ok and detail.startswith("quantized, SQNR"), detail
    model, inputs = annotator.example()
    graph = exported(model, inputs)
    (cumsum,) = [n for n in graph.graph.nodes if n.target == torch.ops.aten.cumsum.default]
    assert cumsum.args[1:] == (1,)
    assert "output" in quantizing(annotate(quantizer, graph))["cumsum"]


# "add a quantizer annotator": one row of the XNNPACK table --------------------------------


def annotate_hardswish(
    gm: GraphModule, config: QuantizationConfig | None, filter_fn: Filter
) -> Partitions:
    """hardswish with its input and output observed (what a new annotator looks like)."""
    partitions = []
    for node in gm.graph.nodes:
        if not is_op(node, HARDSWISH) or is_annotated([node]) or not passes(filter_fn, [node]):
            continue
        act = node.args[0]
        assert isinstance(act, Node)
        set_annotation(node, {act: get_input_act_qspec(config)}, get_output_act_qspec(config))
        partitions.append([node])
    return partitions


def test_one_annotator_row_in_a_copy_of_the_xnnpack_table_quantizes_its_op() -> None:
    """A copy of ``XNNPACK_ANNOTATORS`` with one ``Annotator`` row more, under a namespace
    of its own: the new op is quantized and every other annotation is XNNPACK's."""
    from qquantizer_xnnpack.annotators import XNNPACK_ANNOTATORS
    from qquantizer_xnnpack.config import get_symmetric_quantization_config
    from qquantizer_xnnpack.quantizer import XNNPACKQuantizer

    row = Annotator("hardswish", annotate_hardswish, ops=HARDSWISH, description="hardswish")
    ANNOTATORS.define("xnnpack-plus-one-row", (*XNNPACK_ANNOTATORS, row), source="tests")

    class PlusOneRow(XNNPACKQuantizer):
        namespace = "xnnpack-plus-one-row"

    config = get_symmetric_quantization_config()
    plain = _quantized_ops(XNNPACKQuantizer().set_global(config))
    extended = _quantized_ops(PlusOneRow().set_global(config))
    changed = differences(plain, extended)
    assert list(changed) == ["hardswish"]
    assert changed["hardswish"]["reference"] is None
    assert set(changed["hardswish"]["ours"]) == {"annotated", "inputs", "output"}
    assert "hardswish" in {a.name for a in PlusOneRow().annotators()}


# "add a host/ISA rule": one row of KNOWN_TARGETS in qcore/int8/cpu_profile.py ---------------------


def test_one_host_target_row_is_named_targeted_and_reaches_the_weight_range_choice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A new target, written as one ``Int8Host`` row: ``qcore.host`` parses and targets it
    by name, and the FX mapping picks the same weight ranges as for the known target with
    the same features (what it does for int8 follows from the fields, not the name)."""
    import qcore
    from qcore.int8 import cpu_profile as host

    zen3 = host.Int8Host("zen3", avx2=True, avx512=False, vnni=False, amx=False)
    monkeypatch.setattr(host, "KNOWN_TARGETS", {**host.KNOWN_TARGETS, "zen3": zen3})

    def global_qconfig(target: str) -> Any:
        with qcore.host.targeting(target) as chosen:
            assert qcore.host.target() is chosen
            return qcore.get_qconfig_mapping("onednn").global_qconfig

    assert qcore.host.parse_target("zen3") == zen3 and zen3.saturates_u8s8
    assert qconfig_equals(global_qconfig("zen3"), global_qconfig("avx2"))
    assert not qconfig_equals(global_qconfig("zen3"), global_qconfig("avx512_vnni"))


# "add a tox env": an env section and its env_list entry in tox.ini, then .ci/workflow.py --


def test_one_tox_env_section_gets_a_ci_job_and_a_path_filter(tmp_path: Path) -> None:
    """In a copy of the repository's CI files: a new env in tox.ini, the workflow
    regenerated by ``.ci/workflow.py``, and the copy passes ``--check`` with a job for the
    env that runs when a file it tests changes."""
    import yaml

    for part in (".ci", ".github", "packages", "examples"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("tests*", "src"))
    tox = (ROOT / "tox.ini").read_text().replace("env_list = ", "env_list = newenv, ", 1)
    (tmp_path / "tox.ini").write_text(
        tox + "\n[testenv:newenv]\nset_env =\n    {[testenv]set_env}\n"
        "    QPACKAGES = packages/qcore\n    QTESTS = tests/test_newenv.py\n"
    )

    def run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(tmp_path / ".ci" / script), *args],
            capture_output=True, text=True, check=False,
        )  # fmt: skip

    assert run("workflow.py").returncode == 0
    assert run("workflow.py", "--check").returncode == 0
    jobs = yaml.safe_load((tmp_path / ".github/workflows/ci.yml").read_text())["jobs"]
    commands = [step.get("run", "") for job in jobs.values() for step in job["steps"]]
    assert "python -m tox run -e newenv" in commands
    affected = run("affected.py", "tests/test_newenv.py")
    assert "newenv" in yaml.safe_load(affected.stdout.removeprefix("envs="))
