"""Live parity with torchao 0.18's X86InductorQuantizer, imported as users import it.

Annotations and ``convert_pt2e`` outputs (bit for bit) on the model zoo, for static,
dynamic and QAT configs, and the scoping setters, on a VNNI int8 target (where the x86
recipe and torchao's must agree exactly). Run by ``tox -e reference``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import parity_models as pm
import pytest
import torch
import torchao_reference
from torch import nn

import qcore
from qcore.zoo.suite import pt2e
from qcore.zoo.suite.pt2e import quantizing
from qinductor_x86.quantizer import x86_inductor_quantizer as ours

# imported the way users do (this registers torchao's Inductor passes; nothing here lowers)
REF = torchao_reference.load_with_side_effects()
CASES = [(m, c) for m in pm.MODELS for c in pm.CONFIGS]
#: Converted outputs: QAT on one conv-bn model (each QAT conv-bn prepare costs ~35 s in
#: torchao's pattern rewrite; annotations are compared on every model above)
OUTPUT_CASES = [(m, c) for m, c in CASES if c != "qat" or m in ("resnet", "mlp", "transformer")]
TARGET = "avx512_vnni"


@pytest.fixture(autouse=True)
def vnni_target() -> Iterator[None]:
    with qcore.host.targeting(TARGET):
        yield


@pytest.mark.parametrize(("model", "config"), [case for case in CASES if case not in OUTPUT_CASES])
def test_annotations_identical(model: str, config: str) -> None:
    """(The cases whose outputs are compared too compare their annotations below, recorded
    in the same prepare.)"""
    assert pm.annotate_with(ours, model, config) == pm.annotate_with(REF, model, config)


@pytest.mark.parametrize(("model", "config"), OUTPUT_CASES)
def test_annotations_identical_and_converted_outputs_bit_identical(model: str, config: str) -> None:
    """The annotations each quantizer writes inside the prepare of its flow (recorded as
    ``test_annotations_identical`` records them), and the converted outputs."""
    # QAT: one training-mode pass already moves every fake quant (and each costs ~20 s)
    batches = 1 if config == "qat" else 4
    (q_theirs, _), annotated_theirs = pm.quantize_recorded(REF, model, config, batches)
    (q_ours, ref_float), annotated_ours = pm.quantize_recorded(ours, model, config, batches)
    assert annotated_ours == annotated_theirs
    if config == "qat":  # what the annotation tests record for QAT, without a prepare
        assert annotated_ours == pm.annotate_with(ours, model, config)
        assert annotated_theirs == pm.annotate_with(REF, model, config)
    assert torch.equal(q_ours, q_theirs)
    if model != "functional" or config == "qat":
        assert not torch.equal(q_ours, ref_float)  # something was quantized


# -- scoping ---------------------------------------------------------------------------

Scope = Callable[[Any, Any], Any]


def _static(m: Any) -> Any:
    return m.get_default_x86_inductor_quantization_config()


def _reduced(m: Any) -> Any:
    return m.get_default_x86_inductor_quantization_config(reduce_range=True)


SCOPES: dict[str, tuple[str, Scope]] = {
    "module_name_float": (
        "resnet",
        lambda m, q: q.set_global(_static(m)).set_module_name_qconfig("layer1", None),
    ),
    "module_name_only": (
        "inception",
        lambda m, q: q.set_module_name_qconfig("b2", _static(m)),
    ),
    "module_name_over_global": (
        "mobilenet",
        lambda m, q: q.set_global(_static(m)).set_module_name_qconfig("block1", _reduced(m)),
    ),
    "module_type_linear": (
        "transformer",
        lambda m, q: q.set_module_type_qconfig(nn.Linear, _reduced(m)).set_global(_static(m)),
    ),
    "module_type_conv2d_float": (
        "inception",
        lambda m, q: q.set_global(_static(m)).set_module_type_qconfig(nn.Conv2d, None),
    ),
    "function_type_maxpool_only": (
        "resnet",
        lambda m, q: q.set_function_type_qconfig(
            torch.nn.functional.max_pool2d, _static(m)
        ).set_module_type_qconfig(nn.Conv2d, _static(m)),
    ),
    "function_type_mul_float": (
        "transformer",
        lambda m, q: q.set_global(_static(m)).set_function_type_qconfig(torch.mul, None),
    ),
    "module_name_matmul": (
        "transformer",
        lambda m, q: q.set_module_name_qconfig("", _static(m)),
    ),
    "fp16_linear": (
        "mlp",
        lambda m, q: q.set_module_type_qconfig(
            nn.Linear, m.get_x86_inductor_linear_dynamic_fp16_config()
        ),
    ),
}


def _scoped(module: Any, model: str, scope: Scope) -> tuple[dict[str, Any], torch.Tensor]:
    """(annotations that quantize something, converted output), the annotations recorded
    inside the prepare of that flow (as ``parity_models.recorded`` records them)."""
    recording = pt2e.Recording(scope(module, module.X86InductorQuantizer()), pm.FLAGS)
    out, _ = pm.quantize(recording, model)
    assert recording.seen is not None, "prepare never called annotate"
    return quantizing(recording.seen), out


@pytest.mark.parametrize("name", SCOPES)
def test_scoping_identical(name: str) -> None:
    """Same quantized nodes, specs and sharing, and bit-identical outputs. (torchao also
    writes empty, claimed annotations on the nodes a None config keeps in float; here
    they are kept in float by scope instead: see the README.)"""
    model, scope = SCOPES[name]
    mine, out_mine = _scoped(ours, model, scope)
    theirs, out_theirs = _scoped(REF, model, scope)
    assert mine == theirs
    assert torch.equal(out_mine, out_theirs)
    assert any("inputs" in a for a in mine.values())


@pytest.mark.parametrize(
    ("first", "second"),
    [({"is_qat": True}, {}), ({"is_dynamic": True}, {}), ({}, {"is_dynamic": True})],
)
def test_mixed_modes_are_skipped_with_the_same_warnings(
    first: dict[str, bool], second: dict[str, bool]
) -> None:
    messages = []
    for m in (REF, ours):
        config = m.get_default_x86_inductor_quantization_config
        q = m.X86InductorQuantizer().set_global(config(**first))
        with pytest.warns(UserWarning) as caught:
            q.set_module_name_qconfig("fc", config(**second))
            q.set_global(config(**second))
        messages.append([str(w.message) for w in caught])
        assert q.global_config is config(**first)
    assert messages[1] == messages[0]
