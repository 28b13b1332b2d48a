"""The PT2E half of the conformance kit must fail a quantizer that quantizes nothing.

Fake quantizer plugins are installed as real distributions, each a ``RegistryQuantizer``
over a namespace of its own holding one linear annotator: qcore's own, one that
annotates nothing, or one that marks its node annotated without a single spec.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from qcore.testing import CheckResult, assert_conformant, check_quantizer
from qcore.zoo.suite.fakes import FakeDist, one_plugin

SOURCE = """
import torch
from torchao.quantization.pt2e import HistogramObserver, PerChannelMinMaxObserver
from torchao.quantization.pt2e.quantizer import QuantizationConfig, QuantizationSpec
from qcore.pt2e.annotation.claims import is_op, set_annotation
from qcore.pt2e.annotation.registry_quantizer import RegistryQuantizer
from qcore.pt2e.annotation.registry import ANNOTATORS, Annotator
from qcore.plugin_api import QuantizerPlugin

LINEAR = ANNOTATORS.get("common", "linear")

def annotate_nothing(gm, config, filter_fn):
    return []

def annotate_without_specs(gm, config, filter_fn):
    found = [n for n in gm.graph.nodes if is_op(n, LINEAR.ops)]
    for node in found:
        set_annotation(node, {}, None)
    return [[n] for n in found]

CHOICES = {
    "qcore": LINEAR,
    "nothing": Annotator("linear", annotate_nothing, ops=LINEAR.ops),
    "no_specs": Annotator("linear", annotate_without_specs, ops=LINEAR.ops),
}
ANNOTATORS.define("fake_NAME", [CHOICES["KIND"]], source="fake-quantizer-NAME 1.0")

class Fake(RegistryQuantizer):
    namespace = "fake_NAME"

def make(**options):
    act = QuantizationSpec(
        dtype=torch.uint8, quant_min=0, quant_max=255, qscheme=torch.per_tensor_affine,
        observer_or_fake_quant_ctr=HistogramObserver.with_args(),
    )
    weight = QuantizationSpec(
        dtype=torch.int8, quant_min=-127, quant_max=127, qscheme=torch.per_channel_symmetric,
        ch_axis=0, observer_or_fake_quant_ctr=PerChannelMinMaxObserver.with_args(),
    )
    return Fake().set_global(QuantizationConfig(act, act, weight, None))

PLUGIN = QuantizerPlugin(name="NAME", factory=make, annotator_namespace="fake_NAME")
"""

InstallQuantizer = Callable[[str, str], None]


@pytest.fixture
def install_quantizer(fake_dist: FakeDist) -> InstallQuantizer:
    """Install quantizer ``name`` whose one annotator is ``kind`` (see ``SOURCE``)."""

    def install(name: str, kind: str) -> None:
        source = SOURCE.replace("NAME", name).replace("KIND", kind)
        module = f"fake_quantizer_{name}"
        one_plugin(fake_dist, f"fake-quantizer-{name}", name, module, source,
                   group="qcore.quantizers")  # fmt: skip

    return install


def _checks(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.check: r for r in results}


def test_a_quantizer_that_quantizes_its_op_passes(install_quantizer: InstallQuantizer) -> None:
    install_quantizer("goodq", "qcore")
    checks = _checks(assert_conformant("quantizer", "goodq"))
    assert sorted(checks) == ["annotator", "load", "prepare-convert"]
    assert checks["prepare-convert"].subject == "linear"


def test_an_annotator_that_annotates_nothing_fails(install_quantizer: InstallQuantizer) -> None:
    install_quantizer("lazyq", "nothing")
    checks = _checks(check_quantizer("lazyq"))
    assert not checks["annotator"].ok
    assert checks["annotator"].detail == (
        "AssertionError: the annotator annotated nothing on its example model"
    )
    with pytest.raises(AssertionError, match="annotator linear: AssertionError: the annotator"):
        assert_conformant("quantizer", "lazyq")


def test_annotations_without_specs_quantize_nothing_and_fail(
    install_quantizer: InstallQuantizer,
) -> None:
    """Marked annotated, but no spec: the op is not covered, and conversion inserts no
    quantize op."""
    install_quantizer("emptyq", "no_specs")
    checks = _checks(check_quantizer("emptyq"))
    assert not checks["annotator"].ok
    assert checks["annotator"].detail.startswith("no node of [")
    assert not checks["prepare-convert"].ok
    assert checks["prepare-convert"].detail == "the converted graph holds no quantize op"


def test_backend_options_do_not_apply_to_a_quantizer(install_quantizer: InstallQuantizer) -> None:
    install_quantizer("goodq2", "qcore")
    with pytest.raises(TypeError, match="backends only"):
        assert_conformant("quantizer", "goodq2", stays_float=["linear"])
