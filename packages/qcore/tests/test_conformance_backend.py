"""The FX half of the conformance kit must fail on broken backends, naming the pattern.

Fake backend plugins are installed as real distributions (``fake_dist``) so that the kit
loads them through entry points, as it loads first-party plugins.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import torch.ao.nn.intrinsic as nni
from torch import nn
from torch.ao.quantization import QConfigMapping
from torch.ao.quantization.backend_config import (
    BackendConfig,
    BackendPatternConfig,
    get_onednn_backend_config,
)
from torch.ao.quantization.quantize_fx import prepare_fx

from qcore.testing import CheckResult, assert_conformant, check_backend
from qcore.testing.backend_checks import _check_fuser, _inputs_as_rounded, check_backend_config
from qcore.testing.fresh import run_fresh
from qcore.testing.patterns import PatternNode
from qcore.testing.synth import NotSynthesizableError, synthesize
from qcore.zoo.suite.fakes import one_plugin

# A plugin module: ``BUILD`` (source defining ``build() -> BackendConfig``) is filled per test.
PLUGIN_SOURCE = """
import operator
import torch
import torch.ao.nn.intrinsic as nni
import torch.nn.functional as F
from torch import nn
from torch.ao.quantization import QConfigMapping
from torch.ao.quantization.backend_config import (
    BackendConfig, BackendPatternConfig, DTypeConfig, ObservationType,
)
from qcore.plugin_api import BackendPlugin

WEIGHTED = DTypeConfig(
    input_dtype=torch.quint8, output_dtype=torch.quint8,
    weight_dtype=torch.qint8, bias_dtype=torch.float,
)
ACT = DTypeConfig(input_dtype=torch.quint8, output_dtype=torch.quint8)

def linear():
    return (
        BackendPatternConfig(nn.Linear)
        .set_observation_type(ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT)
        .add_dtype_config(WEIGHTED)
        .set_root_module(nn.Linear)
        .set_reference_quantized_module(torch.ao.nn.quantized.reference.Linear)
    )

def conv_relu(fuser):
    return (
        BackendPatternConfig((nn.Conv2d, nn.ReLU))
        .add_dtype_config(WEIGHTED)
        .set_fuser_method(fuser)
        .set_fused_module(nni.ConvReLU2d)
    )

def conv_relu_fused():
    return (
        BackendPatternConfig(nni.ConvReLU2d)
        .add_dtype_config(WEIGHTED)
        .set_root_module(nn.Conv2d)
        .set_reference_quantized_module(torch.ao.nn.quantized.reference.Conv2d)
    )

PLUGIN_FIELDS = {{}}

{build}

# a fictional chip's kernels run elsewhere: the reference representation, unless a test says
PLUGIN = BackendPlugin(name="{name}", backend_config=build,
                       **{{"reference_convert": True, **PLUGIN_FIELDS}})
"""

GOOD = """
def build():
    fuse = lambda is_qat, conv, relu: nni.ConvReLU2d(conv, relu)
    return (
        BackendConfig("good")
        .set_backend_pattern_config(linear())
        .set_backend_pattern_config(conv_relu(fuse))
        .set_backend_pattern_config(conv_relu_fused())
        .set_backend_pattern_config(BackendPatternConfig(operator.add).add_dtype_config(ACT))
    )
"""


InstallBackend = Callable[[str, str], None]


@pytest.fixture
def install_backend(fake_dist: Callable[..., Path]) -> InstallBackend:
    """Install a backend plugin named ``name`` whose module defines ``build`` as given."""

    def install(name: str, build: str) -> None:
        module = f"fake_backend_{name}"
        source = PLUGIN_SOURCE.format(build=textwrap.dedent(build), name=name)
        one_plugin(fake_dist, f"fake-backend-{name}", name, module, source)

    return install


def _only(results: list[CheckResult], check: str, subject: str) -> CheckResult:
    found = [r for r in results if r.check == check and r.subject == subject]
    assert len(found) == 1, f"expected one {check} result for {subject}, got {results}"
    return found[0]


def test_a_conformant_plugin_passes_every_check(install_backend: InstallBackend) -> None:
    install_backend("goodchip", GOOD)
    results = assert_conformant("backend", "goodchip")
    assert _only(results, "load", "goodchip").detail == "4 patterns; qconfig mapping: torch's default"
    checks = sorted((r.check, r.subject) for r in results if r.check != "load")
    assert checks == [
        ("engine", "goodchip"),
        ("fuser-method", "Conv2d → ReLU"),
        ("prepare-convert", "Conv2d → ReLU"),
        ("prepare-convert", "Linear"),
        ("prepare-convert", "nni.ConvReLU2d"),
        ("prepare-convert", "operator.add"),
        ("well-formed", "Conv2d → ReLU"),
        ("well-formed", "Linear"),
        ("well-formed", "nni.ConvReLU2d"),
        ("well-formed", "operator.add"),
    ]
    assert "quantized" in _only(results, "prepare-convert", "Conv2d → ReLU").detail


GOOD_SUBJECTS = ["Conv2d → ReLU", "Linear", "nni.ConvReLU2d", "operator.add"]


def _prepare_convert(results: list[CheckResult]) -> dict[str, CheckResult]:
    return {r.subject: r for r in results if r.check == "prepare-convert"}


def test_every_pattern_of_a_conformant_plugin_is_quantized_above_the_floor(
    install_backend: InstallBackend,
) -> None:
    install_backend("floorchip", GOOD)
    runs = _prepare_convert(assert_conformant("backend", "floorchip"))
    assert sorted(runs) == GOOD_SUBJECTS
    for subject, result in runs.items():
        db = float(re.fullmatch(r"quantized, SQNR (\S+) dB \(floor 20 dB\)", result.detail)[1])
        # int8 against float: far above the floor, far below float's exactness
        assert 25 < db < 60, (subject, result.detail)


# A mapping that quantizes nothing: every pattern stays float.
NOTHING = GOOD + """
PLUGIN_FIELDS = {"qconfig_mapping": lambda is_qat, model=None: QConfigMapping()}
"""


def test_a_backend_that_quantizes_nothing_fails(install_backend: InstallBackend) -> None:
    install_backend("nothingchip", NOTHING)
    results = check_backend("nothingchip")
    runs = _prepare_convert(results)
    assert _only(results, "load", "nothingchip").detail.endswith("qconfig mapping: the plugin's own")
    assert sorted(runs) == GOOD_SUBJECTS
    for result in runs.values():
        assert not result.ok
        assert result.detail.startswith("left in float by the mapping, and not declared")
    with pytest.raises(AssertionError, match=r"(?s)failed 4 of .*prepare-convert Linear: left in"):
        assert_conformant("backend", "nothingchip")


def test_declared_float_patterns_must_stay_float(install_backend: InstallBackend) -> None:
    """The declaration is exact: what it names stays float, what it omits quantizes."""
    install_backend("nothingchip", NOTHING)
    runs = _prepare_convert(assert_conformant("backend", "nothingchip", stays_float=GOOD_SUBJECTS))
    assert sorted(runs) == GOOD_SUBJECTS
    assert all(r.detail.startswith("stays float, as declared") for r in runs.values())
    # the same declaration on a backend that does quantize them fails each one
    install_backend("goodchip", GOOD)
    runs = _prepare_convert(check_backend("goodchip", stays_float=["Linear", "operator.add"]))
    assert {s for s, r in runs.items() if not r.ok} == {"Linear", "operator.add"}
    assert runs["Linear"].detail.startswith("declared in stays_float, but quantized")


def test_the_plugins_declaration_is_the_default_and_names_must_exist(
    install_backend: InstallBackend,
) -> None:
    install_backend(
        "halfchip",
        GOOD + """
def _mapping(is_qat, model=None):
    from torch.ao.quantization import get_default_qconfig_mapping
    return get_default_qconfig_mapping().set_object_type(nn.Linear, None)
PLUGIN_FIELDS = {"qconfig_mapping": _mapping, "stays_float": ("Linear", "Conv3d")}
""",
    )
    results = check_backend("halfchip")
    assert [str(r) for r in results if not r.ok] == [
        "FAIL backend:halfchip stays-float Conv3d: declared to stay float, but the backend "
        "has no pattern of that name"
    ]
    assert _prepare_convert(results)["Linear"].detail.startswith("stays float, as declared")


# Weights declared quint8: valid dtypes that contradict the mapping's qint8 weights. FX keeps
# the nn.Linear (and F.linear's weight) float between its neighbours' quantize and
# dequantize ops; the input's quantize op must not make the pattern count as quantized.
QUINT8_WEIGHTS = """
import torch.nn.functional as F
UINT8_WEIGHTS = DTypeConfig(
    input_dtype=torch.quint8, output_dtype=torch.quint8,
    weight_dtype=torch.quint8, bias_dtype=torch.float,
)
def build():
    functional = (
        BackendPatternConfig(F.linear)
        .set_observation_type(ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT)
        .add_dtype_config(UINT8_WEIGHTS)
        ._set_input_type_to_index({"weight": 1, "bias": 2})
    )
    return (
        BackendConfig("uint8weights")
        .set_backend_pattern_config(linear().set_dtype_configs([UINT8_WEIGHTS]))
        .set_backend_pattern_config(functional)
        .set_backend_pattern_config(BackendPatternConfig(operator.add).add_dtype_config(ACT))
    )
"""


def test_a_weighted_module_left_float_next_to_a_quantize_op_fails_naming_the_dtype_config(
    install_backend: InstallBackend,
) -> None:
    install_backend("uint8chip", QUINT8_WEIGHTS)
    runs = _prepare_convert(check_backend("uint8chip"))
    refused = (
        "the pattern's dtype configs refuse the mapping's qconfig for {}: weight_dtype "
        "torch.quint8 in the dtype config, torch.qint8 from the qconfig"
    )
    linear, functional = runs["Linear"], runs["torch.linear"]
    assert not linear.ok and not functional.ok
    assert re.fullmatch(r"Linear '\S+' kept a float weight: " + re.escape(refused.format("nn.Linear")),
                        linear.detail), linear.detail  # fmt: skip
    assert re.fullmatch(r"linear call '\S+' kept a float weight: "
                        + re.escape(refused.format("torch.linear")),
                        functional.detail), functional.detail  # fmt: skip
    # the weightless pattern next to them is judged as before: quantized
    assert runs["operator.add"].ok and runs["operator.add"].detail.startswith("quantized")


@pytest.mark.parametrize(
    ("dtype_config", "why"),
    [
        ("DTypeConfig(input_dtype=torch.quint8, output_dtype=torch.float, "
         "weight_dtype=torch.qint8, bias_dtype=torch.float, is_dynamic=True)",
         "the pattern's dtype configs refuse the mapping's qconfig for nn.Linear: "
         "is_dynamic=True in the dtype config, False from the qconfig"),
        ("DTypeConfig(input_dtype=DTypeWithConstraints(torch.quint8, quant_min_lower_bound=0, "
         "quant_max_upper_bound=63), output_dtype=torch.quint8, weight_dtype=torch.qint8, "
         "bias_dtype=torch.float)",
         "a dtype config has the mapping's dtypes, so one of its constraints (quant range, "
         "scale bounds) refuses the mapping's observers"),
    ],
)  # fmt: skip
def test_a_refusal_beyond_the_weight_dtype_is_named_too(
    install_backend: InstallBackend, dtype_config: str, why: str
) -> None:
    install_backend("refusechip", f"""
from torch.ao.quantization.backend_config import DTypeWithConstraints
def build():
    return BackendConfig("refuse").set_backend_pattern_config(
        linear().set_dtype_configs([{dtype_config}]))
""")
    linear = _prepare_convert(check_backend("refusechip"))["Linear"]
    assert not linear.ok
    assert re.fullmatch(r"Linear '\S+' kept a float weight: " + re.escape(why), linear.detail), (
        linear.detail
    )


def test_a_weighted_module_the_mapping_leaves_float_blames_the_mapping(
    install_backend: InstallBackend,
) -> None:
    """The converted nn.Linear is the evidence; the mapping's None is the reason."""
    install_backend("nothingchip", NOTHING)
    linear = _prepare_convert(check_backend("nothingchip"))["Linear"]
    assert re.fullmatch(r"left in float by the mapping, and not declared in stays_float: "
                        r"Linear '\S+' kept a float weight", linear.detail), linear.detail  # fmt: skip


def test_a_pattern_quantized_below_the_floor_fails(install_backend: InstallBackend) -> None:
    """2-bit activations: quantized, but far from float."""
    install_backend(
        "twobitchip",
        GOOD + """
from torch.ao.quantization import QConfig, MinMaxObserver, default_per_channel_weight_observer
def _mapping(is_qat, model=None):
    act = MinMaxObserver.with_args(dtype=torch.quint8, quant_min=0, quant_max=3)
    return QConfigMapping().set_global(QConfig(act, default_per_channel_weight_observer))
PLUGIN_FIELDS = {"qconfig_mapping": _mapping}
""",
    )
    runs = _prepare_convert(check_backend("twobitchip"))
    for result in runs.values():
        assert not result.ok
        db = float(re.fullmatch(r"quantized, SQNR (\S+) dB, below the floor of 20 dB", result.detail)[1])
        assert db < 15  # 2 bits: about 6 dB a bit, far below
    assert all(r.ok for r in _prepare_convert(check_backend("twobitchip", min_sqnr_db=0)).values())


def test_the_floor_is_inclusive(
    install_backend: InstallBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pattern whose SQNR lands exactly on the floor meets it (the floor is documented as
    the lowest SQNR that passes); a floor a hair above that SQNR fails it."""
    install_backend("exactfloorchip", GOOD)
    monkeypatch.setattr("qcore.testing.backend_checks.sqnr", lambda reference, actual: 20.0)
    at_floor = _prepare_convert(check_backend("exactfloorchip", min_sqnr_db=20.0))
    assert at_floor and all(r.ok for r in at_floor.values()), at_floor
    above = _prepare_convert(check_backend("exactfloorchip", min_sqnr_db=20.000001))
    assert above and not any(r.ok for r in above.values()), above


def test_a_fuser_returning_the_wrong_module_fails(install_backend: InstallBackend) -> None:
    install_backend(
        "wrongfuser",
        """
        def build():
            wrong = lambda is_qat, conv, relu: nn.Sequential(conv, relu)
            return (
                BackendConfig("wrong")
                .set_backend_pattern_config(conv_relu(wrong))
                .set_backend_pattern_config(conv_relu_fused())
            )
        """,
    )
    result = _only(check_backend("wrongfuser"), "fuser-method", "Conv2d → ReLU")
    assert not result.ok
    assert "Sequential" in result.detail and "nni.ConvReLU2d" in result.detail
    with pytest.raises(AssertionError, match=r"fuser-method Conv2d → ReLU: .*Sequential"):
        assert_conformant("backend", "wrongfuser")


def test_a_fusions_last_op_is_no_pattern_of_its_own(install_backend: InstallBackend) -> None:
    """A PTQ fuser that drops the conv and returns the ReLU: ReLU appears in the backend
    only inside the conv-relu fusion, which gives no pattern that quantizes a lone ReLU."""
    install_backend(
        "relufuser",
        """
        def build():
            only_relu = lambda is_qat, conv, relu: relu
            return (
                BackendConfig("relu")
                .set_backend_pattern_config(conv_relu(only_relu))
                .set_backend_pattern_config(conv_relu_fused())
            )
        """,
    )
    result = _only(check_backend("relufuser"), "fuser-method", "Conv2d → ReLU")
    assert not result.ok
    assert "ptq fusion built ReLU: neither fused_module" in result.detail


def test_a_qat_fuser_that_folds_too_far_fails(install_backend: InstallBackend) -> None:
    # QAT needs the fused module itself (it is swapped for nniqat.ConvReLU2d and trained)
    install_backend(
        "qatfold",
        """
        def build():
            fold = lambda is_qat, conv, relu: conv
            return (
                BackendConfig("qatfold")
                .set_backend_pattern_config(conv_relu(fold))
                .set_backend_pattern_config(
                    conv_relu_fused().set_qat_module(torch.ao.nn.intrinsic.qat.ConvReLU2d)
                )
                .set_backend_pattern_config(
                    BackendPatternConfig(nn.Conv2d).add_dtype_config(WEIGHTED)
                )
            )
        """,
    )
    result = _only(check_backend("qatfold"), "fuser-method", "Conv2d → ReLU")
    assert not result.ok
    assert result.detail.startswith("qat fusion built Conv2d")


def _install_raising_fuser(install_backend: InstallBackend, name: str, raise_it: str) -> None:
    """A backend whose conv → relu fuser runs the statement ``raise_it``."""
    install_backend(
        name,
        f"""
        from qcore.fx.patterns import UnfusablePattern

        def build():
            def fuser(is_qat, conv, relu):
                {raise_it}
            return (
                BackendConfig("{name}")
                .set_backend_pattern_config(conv_relu(fuser))
                .set_backend_pattern_config(conv_relu_fused())
            )
        """,
    )


def test_a_fuser_that_raises_fails(install_backend: InstallBackend) -> None:
    _install_raising_fuser(install_backend, "raisingfuser", 'raise RuntimeError("fuser exploded")')
    results = check_backend("raisingfuser")
    fuser = _only(results, "fuser-method", "Conv2d → ReLU")
    assert not fuser.ok and "fuser exploded" in fuser.detail
    run = _only(results, "prepare-convert", "Conv2d → ReLU")
    assert not run.ok and run.detail.startswith("prepare_fx raised RuntimeError: fuser exploded")


def test_a_fuser_that_declines_is_a_declared_limitation(install_backend: InstallBackend) -> None:
    """UnfusablePattern: the fuser refuses on purpose, with the fix in its message."""
    _install_raising_fuser(
        install_backend,
        "decliningfuser",
        'raise UnfusablePattern("pattern (nn.Conv2d, nn.ReLU): use nn.Foo instead")',
    )
    results = assert_conformant("backend", "decliningfuser")
    expected = "declined: pattern (nn.Conv2d, nn.ReLU): use nn.Foo instead"
    for check in ("fuser-method", "prepare-convert"):
        result = _only(results, check, "Conv2d → ReLU")
        assert result.ok and result.detail == expected


def test_a_fuser_that_asserts_fails(install_backend: InstallBackend) -> None:
    """An AssertionError (torch's fused modules reject a function so) is a crash."""
    _install_raising_fuser(
        install_backend,
        "assertingfuser",
        'raise AssertionError("Incorrect types for input modules")',
    )
    results = check_backend("assertingfuser")
    fuser = _only(results, "fuser-method", "Conv2d → ReLU")
    assert not fuser.ok
    assert fuser.detail == "ptq fusion raised AssertionError: Incorrect types for input modules"
    run = _only(results, "prepare-convert", "Conv2d → ReLU")
    assert not run.ok
    assert run.detail == "prepare_fx raised AssertionError: Incorrect types for input modules"
    with pytest.raises(AssertionError, match="fuser-method Conv2d → ReLU: ptq fusion raised"):
        assert_conformant("backend", "assertingfuser")


@pytest.mark.parametrize(
    ("declaration", "subject", "complaint"),
    [
        (
            "BackendPatternConfig((nn.Conv2d, (nn.ReLU,))).add_dtype_config(WEIGHTED)",
            None,
            "pattern: simple pattern (a chain in execution order): a nested tuple",
        ),
        (
            "BackendPatternConfig(nn.Linear).add_dtype_config(WEIGHTED)"
            ".set_observation_type('share')",
            "Linear",
            "observation_type: 'share' is not an ObservationType",
        ),
        (
            "BackendPatternConfig(nn.Linear).add_dtype_config(WEIGHTED)"
            ".set_root_module(torch.relu)",
            "Linear",
            "root_module: <built-in method relu",
        ),
        (
            "BackendPatternConfig(nn.Linear).add_dtype_config(WEIGHTED)"
            ".set_fused_module(nni.LinearReLU)",
            "Linear",
            "fused_module is set but fuser_method is not",
        ),
        (
            "BackendPatternConfig(nn.Linear).add_dtype_config("
            "DTypeConfig(input_dtype=torch.quint8, weight_dtype=torch.complex64))",
            "Linear",
            "dtype_configs[0].weight_dtype: torch.complex64 is not a quantization dtype",
        ),
        (
            "BackendPatternConfig.from_dict({'pattern': operator.add, 'dtype_configs': [ACT],"
            " 'num_tensor_args_to_observation_type': {3: 'shared'}})",
            "operator.add",
            "num_tensor_args_to_observation_type: 3 -> 'shared'",
        ),
        (
            "BackendPatternConfig(F.relu)",
            "F.relu",
            "dtype_configs: empty, and no fuser_method",
        ),
        (
            "BackendPatternConfig(F.relu).add_dtype_config(ACT).set_qat_module(nn.ReLU)",
            "F.relu",
            "qat_module is set, but the pattern is not a single module class",
        ),
    ],
)
def test_a_malformed_pattern_fails_well_formed(
    install_backend: InstallBackend, declaration: str, subject: str | None, complaint: str
) -> None:
    install_backend(
        "malformed",
        f"""
        def build():
            return (
                BackendConfig("malformed")
                .set_backend_pattern_config({declaration})
            )
        """,
    )
    results = check_backend("malformed")
    failed = [r for r in results if not r.ok]
    assert [r.check for r in failed] == ["well-formed"], failed
    assert complaint in failed[0].detail
    if subject is not None:
        assert failed[0].subject == subject
    # a broken declaration is not run through prepare/convert: it would only restate it
    assert not [r for r in results if r.check == "prepare-convert"]


def test_a_pattern_whose_conversion_crashes_fails(install_backend: InstallBackend) -> None:
    install_backend(
        "badconvert",
        """
        class BrokenReference(nn.Module):
            @classmethod
            def from_float(cls, *args, **kwargs):
                raise RuntimeError("no reference module for you")

        def build():
            return BackendConfig("badconvert").set_backend_pattern_config(
                linear().set_reference_quantized_module(BrokenReference)
            )
        """,
    )
    result = _only(check_backend("badconvert"), "prepare-convert", "Linear")
    assert not result.ok
    assert result.detail == (
        "convert_to_reference_fx raised RuntimeError: no reference module for you"
    )
    with pytest.raises(AssertionError, match="prepare-convert Linear: convert_to_reference"):
        assert_conformant("backend", "badconvert")


def test_an_op_the_kit_cannot_synthesize_fails_with_its_name(
    install_backend: InstallBackend,
) -> None:
    install_backend(
        "exotic",
        """
        def build():
            return BackendConfig("exotic").set_backend_pattern_config(
                BackendPatternConfig(torch.cumsum).add_dtype_config(ACT)
            )
        """,
    )
    result = _only(check_backend("exotic"), "prepare-convert", "torch.cumsum")
    assert not result.ok
    assert result.detail == (
        "not synthesizable: no example for op torch.cumsum: add its row to "
        "qcore.fx.patterns.examples.OP_EXAMPLES (packages/qcore/src/qcore/fx/patterns/examples.py)"
    )


def test_a_plugin_that_cannot_load_fails_one_load_check(install_backend: InstallBackend) -> None:
    install_backend("brokenbuild", "def build():\n    raise RuntimeError('cannot build')\n")
    results = check_backend("brokenbuild")
    assert [(r.check, r.ok) for r in results] == [("load", False)]
    assert "fake-backend-brokenbuild" in results[0].detail
    assert "cannot build" in results[0].detail


def test_the_quantized_engine_is_restored() -> None:
    before = torch.backends.quantized.engine
    other = next(e for e in ("qnnpack", "onednn", "x86") if e != before)
    config = BackendConfig("tiny").set_backend_pattern_config(
        get_onednn_backend_config().configs[0]  # nn.Conv1d
    )
    results = check_backend_config(config, convert="native", engine=other)
    assert all(r.ok for r in results), results
    assert torch.backends.quantized.engine == before


# The synthesizer, checked against torch's own pattern matching --------------------------


def _fused_types(model: nn.Module) -> set[type]:
    return {type(m) for m in model.modules()}


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        # torch's reversed nested format: add(bn(conv(x)), any), any on the left or right
        ((torch.add, (nn.BatchNorm2d, nn.Conv2d), "*"), nni.ConvAdd2d),
        ((torch.add, "*", (nn.BatchNorm2d, nn.Conv2d)), nni.ConvAdd2d),
        ((nn.ReLU, (torch.add, "*", nn.Conv2d)), nni.ConvAddReLU2d),
    ],
)
def test_complex_patterns_synthesize_to_models_torch_fuses(
    pattern: tuple[object, ...], expected: type
) -> None:
    def tree(p: object) -> PatternNode | None:
        if p == "*":
            return None
        if isinstance(p, tuple):
            return PatternNode(p[0], tuple(tree(a) for a in p[1:]))
        return PatternNode(p)

    root = tree(pattern)
    assert root is not None
    case = synthesize(root)
    assert len(case.example_inputs) == 2  # the conv input and the "any node" operand
    prepared = prepare_fx(
        case.model,
        _torch_onednn_mapping(),
        case.example_inputs,
        backend_config=get_onednn_backend_config(),
    )
    assert expected in _fused_types(prepared)


def _torch_onednn_mapping() -> QConfigMapping:
    from torch.ao.quantization import get_default_qconfig_mapping

    return get_default_qconfig_mapping("onednn")


def test_synthesis_names_the_op_it_lacks() -> None:
    with pytest.raises(NotSynthesizableError, match=r"torch\.cumsum"):
        synthesize(PatternNode(torch.cumsum))


def test_torch_onednn_patterns_all_synthesize() -> None:
    """Coverage against torch's own config (independent of the plugin packages)."""
    from qcore.testing.patterns import pattern_tree

    unsynthesizable = []
    for config in get_onednn_backend_config().configs:
        try:
            synthesize(pattern_tree(config))
        except NotSynthesizableError as exc:
            unsynthesizable.append(str(exc))
    # only the two Tensor methods torch declares but Tensor lacks
    assert len(unsynthesizable) == 2, unsynthesizable
    assert all("has no attribute 'hardsigmoid" in e for e in unsynthesizable)


def test_qcore_import_stays_cheap_after_loading_the_kit_module() -> None:
    # the kit is imported lazily from qcore.testing; qcore itself must not pull it in
    code = (
        "import sys, qcore, qcore.testing.fresh as f; f.emit('qcore.testing.synth' in sys.modules)"
    )
    assert run_fresh(code).result() is False


def _onednn_pattern(text: str) -> BackendPatternConfig:
    from qcore.fx.patterns.text import pattern_text

    return next(c for c in get_onednn_backend_config().configs if pattern_text(c) == text)


@pytest.mark.parametrize(
    ("pattern", "fused"),
    [
        ("torch.add(BatchNorm2d(Conv2d), *)", "nni.ConvAdd2d"),
        ("operator.add(*, Conv2d)", "nni.ConvAdd2d"),
        ("ReLU(torch.add(*, BatchNorm2d(Conv2d)))", "nni.ConvAddReLU2d"),
        # F.relu: torch's fusion pass hands the fuser a ReLU module in its place
        ("Conv2d → F.relu", "nni.ConvReLU2d"),
        ("Linear → F.relu", "nni.LinearReLU"),
        ("BatchNorm2d → F.relu", "nni.BNReLU2d"),
    ],
)
def test_complex_format_fusers_are_called_as_torch_calls_them(pattern: str, fused: str) -> None:
    """torch's own patterns: their fusers, given the modules root first, the "any node"
    operand as MatchAllNode and ``F.relu`` as a ReLU module (as torch's fusion pass gives
    them), build the module torch declares."""
    config = _onednn_pattern(pattern)
    ok, detail = _check_fuser(BackendConfig("t").set_backend_pattern_config(config), config)
    assert (ok, detail) == (True, f"ptq: {fused}")


class _TwoInputs(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


def test_inputs_are_rounded_by_their_own_quantize_ops() -> None:
    """Two inputs of very different ranges, each quantized by its own observer: each
    comes back on its own int8 grid, within half of its own step (range / 255)."""
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_to_reference_fx

    gen = torch.Generator().manual_seed(0)
    x, y = torch.rand(64, generator=gen), torch.rand(64, generator=gen) * 100
    config = get_onednn_backend_config()
    prepared = prepare_fx(_TwoInputs(), get_default_qconfig_mapping("onednn"), (x, y), backend_config=config)
    prepared(x, y)
    converted = convert_to_reference_fx(prepared, backend_config=config)
    rounded_x, rounded_y = _inputs_as_rounded(converted, (x, y))
    for original, rounded, top in ((x, rounded_x, 1.0), (y, rounded_y, 100.0)):
        error = (rounded - original).abs()
        assert 0 < float(error.max()) <= top / 255 / 2 * 1.01
    assert _inputs_as_rounded(_TwoInputs(), (x, y)) == (x, y)  # no graph: as given


def _conv_relu_config(fuser: Callable[..., nn.Module]) -> tuple[BackendConfig, BackendPatternConfig]:
    """A conv → relu pattern fused by ``fuser``, whose fused module QAT swaps and trains."""
    import torch.ao.nn.intrinsic.qat as nniqat
    from torch.ao.quantization.backend_config import DTypeConfig

    weighted = DTypeConfig(
        input_dtype=torch.quint8, output_dtype=torch.quint8, weight_dtype=torch.qint8, bias_dtype=torch.float
    )
    pattern = (
        BackendPatternConfig((nn.Conv2d, nn.ReLU))
        .add_dtype_config(weighted)
        .set_fuser_method(fuser)
        .set_fused_module(nni.ConvReLU2d)
    )
    fused = (
        BackendPatternConfig(nni.ConvReLU2d)
        .add_dtype_config(weighted)
        .set_root_module(nn.Conv2d)
        .set_qat_module(nniqat.ConvReLU2d)
    )
    return BackendConfig("t").set_backend_pattern_config(pattern).set_backend_pattern_config(fused), pattern


def test_a_qat_swappable_pattern_is_fused_for_both_modes() -> None:
    """PTQ and QAT fusion both run: a fuser building the fused module only for QAT fails
    on its PTQ fusion, which gives a module the backend has no pattern for."""
    config, pattern = _conv_relu_config(lambda is_qat, conv, relu: nni.ConvReLU2d(conv, relu))
    assert _check_fuser(config, pattern) == (True, "ptq: nni.ConvReLU2d, qat: nni.ConvReLU2d")

    def qat_only(is_qat: bool, conv: nn.Module, relu: nn.Module) -> nn.Module:
        return nni.ConvReLU2d(conv, relu) if is_qat else nn.Sequential(conv, relu)

    config, pattern = _conv_relu_config(qat_only)
    ok, detail = _check_fuser(config, pattern)
    assert not ok and detail.startswith("ptq fusion built Sequential"), detail


class _Unknown(nn.Module):
    """A module class no row of the example table covers."""


def test_a_fuser_whose_input_modules_cannot_be_built_fails() -> None:
    config, _ = _conv_relu_config(lambda is_qat, conv, relu: nni.ConvReLU2d(conv, relu))
    pattern = BackendPatternConfig((nn.Conv2d, _Unknown)).set_fuser_method(
        lambda is_qat, conv, other: conv
    )
    ok, detail = _check_fuser(config.set_backend_pattern_config(pattern), pattern)
    assert not ok and detail.startswith("cannot build the fuser's input modules:"), detail
    assert "_Unknown" in detail


class _Misconverted(nn.Module):
    """A reference linear whose output ``change`` alters."""

    change: Callable[[torch.Tensor], object] = staticmethod(lambda out: out)

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner

    def forward(self, x: torch.Tensor) -> object:
        return type(self).change(self.inner(x))

    @classmethod
    def from_float(cls, float_module: nn.Module, weight_qparams: object) -> nn.Module:
        return cls(torch.ao.nn.quantized.reference.Linear.from_float(float_module, weight_qparams))


class _ReshapingLinear(_Misconverted):
    change = staticmethod(lambda out: out.reshape(-1))


class _NaNLinear(_Misconverted):
    change = staticmethod(lambda out: out * float("nan"))


class _TwoOutputLinear(_Misconverted):
    change = staticmethod(lambda out: (out, out))


@pytest.mark.parametrize(
    ("reference", "complaint"),
    [
        (_Misconverted, "quantized, SQNR"),  # unchanged: the control
        (_ReshapingLinear, "output shape ("),
        (_NaNLinear, "non-finite outputs"),
        (_TwoOutputLinear, "2 outputs, the float model gives 1"),
    ],
)
def test_a_converted_pattern_must_give_the_float_models_outputs(reference: type, complaint: str) -> None:
    """Dynamic quantization: the converted pattern's float output is the model's, as is."""
    from torch.ao.quantization import default_dynamic_qconfig
    from torch.ao.quantization.backend_config import DTypeConfig, ObservationType

    weighted = DTypeConfig(
        input_dtype=torch.quint8, output_dtype=torch.float, weight_dtype=torch.qint8,
        bias_dtype=torch.float, is_dynamic=True,
    )  # fmt: skip
    pattern = (
        BackendPatternConfig(nn.Linear)
        .set_observation_type(ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT)
        .add_dtype_config(weighted)
        .set_root_module(nn.Linear)
        .set_reference_quantized_module(reference)
    )
    dynamic = lambda model, is_qat: QConfigMapping().set_global(default_dynamic_qconfig)  # noqa: E731
    results = check_backend_config(BackendConfig("t").set_backend_pattern_config(pattern), dynamic)
    run = _only(results, "prepare-convert", "Linear")
    assert run.ok is (reference is _Misconverted) and run.detail.startswith(complaint), run.detail


@pytest.mark.parametrize(("convert", "called"), [("reference", "convert_to_reference_fx"), ("native", "convert_fx")])
def test_each_convert_mode_runs_its_torch_converter(
    monkeypatch: pytest.MonkeyPatch, convert: str, called: str
) -> None:
    """``"reference"`` runs torch's convert_to_reference_fx, ``"native"`` its convert_fx:
    each is replaced by one that raises, naming itself."""
    from torch.ao.quantization import quantize_fx

    for name in ("convert_fx", "convert_to_reference_fx"):

        def refuse(*args: object, name: str = name, **kwargs: object) -> None:
            raise RuntimeError(f"{name} was called")

        monkeypatch.setattr(quantize_fx, name, refuse)
    config = BackendConfig("tiny").set_backend_pattern_config(get_onednn_backend_config().configs[0])
    run = _only(check_backend_config(config, convert=convert), "prepare-convert", "Conv1d")  # type: ignore[arg-type]
    assert run.detail == f"{called} raised RuntimeError: {called} was called"


def test_report_lines_keep_the_first_line_and_at_most_300_characters() -> None:
    from qcore.testing.backend_checks import _one_line

    assert _one_line(RuntimeError("first\nsecond")) == "RuntimeError: first"
    long = _one_line(ValueError("x" * 1000))
    assert len(long) == 300 and long == "ValueError: " + "x" * 285 + "..."
    assert _one_line(ValueError("x" * 288)) == "ValueError: " + "x" * 288  # 300 exactly


def test_backends_without_a_mapping_get_torchs_default_ones() -> None:
    from torch.ao.quantization import get_default_qat_qconfig_mapping, get_default_qconfig_mapping
    from torch.ao.quantization.qconfig import qconfig_equals

    from qcore.testing.backend_checks import default_mapping

    for is_qat, torchs in ((False, get_default_qconfig_mapping()), (True, get_default_qat_qconfig_mapping())):
        ours = default_mapping(nn.Linear(2, 2), is_qat)
        assert qconfig_equals(ours.global_qconfig, torchs.global_qconfig)
        assert ours.object_type_qconfigs.keys() == torchs.object_type_qconfigs.keys()


def test_a_pattern_listed_twice_fails_its_second_declaration() -> None:
    """A config whose pattern list names one pattern twice (torch's BackendConfig keys
    patterns, but a plugin may hand the kit its own list): the second is malformed."""
    from types import SimpleNamespace

    linear = get_onednn_backend_config().configs[0]
    results = check_backend_config(SimpleNamespace(configs=[linear, linear]))  # type: ignore[arg-type]
    formed = [r for r in results if r.check == "well-formed"]
    assert [(r.ok, r.detail) for r in formed] == [
        (True, ""), (False, "the same pattern is declared more than once")
    ]


@pytest.mark.parametrize(
    ("method", "allowed"),
    [("hardsigmoid", True), ("hardsigmoid_", True), ("leaky_relu", True), ("softsign", False)],
)
def test_only_the_allow_listed_tensor_methods_may_stay_unsynthesizable(
    install_backend: InstallBackend, method: str, allowed: bool
) -> None:
    """torch's own configs declare the methods ``hardsigmoid``, ``hardsigmoid_`` and
    ``leaky_relu``, which ``torch.Tensor`` lacks: no model can hold them, so they pass; any
    other method the kit cannot build a model for fails."""
    assert not hasattr(torch.Tensor, method)
    name = f"method{method.replace('_', 'x')}"
    install_backend(
        name,
        f"""
        def build():
            return BackendConfig("{name}").set_backend_pattern_config(
                BackendPatternConfig("{method}").add_dtype_config(ACT)
            )
        """,
    )
    (result,) = [r for r in check_backend(name) if r.check == "prepare-convert"]
    assert result.ok is allowed, result
    prefix = "not synthesizable (allow-listed): " if allowed else "not synthesizable: "
    assert result.detail.startswith(prefix), result


@pytest.mark.parametrize(
    ("fields", "ok", "detail"),
    [
        ("{}", True, "reference representation (reference_convert=True): no engine's kernels"),
        ('{"reference_convert": False, "quantized_engine": "qnnpack"}', True,
         "native kernels of 'qnnpack'"),
        ('{"reference_convert": False}', False,
         "converts to torch's native kernels (reference_convert=False) but declares no "
         "quantized_engine: its weights would be packed for whichever engine is current"),
        ('{"quantized_engine": "qnnpack"}', False,
         "quantized_engine='qnnpack' with reference_convert=True: a reference model runs no "
         "engine's kernels; declare one of the two"),
        ('{"reference_convert": False, "quantized_engine": "npu"}', False,
         "quantized_engine='npu' is not an engine of this torch build (supported: "),
    ],
)  # fmt: skip
def test_a_backend_says_whose_kernels_its_converted_model_runs(
    install_backend: InstallBackend, fields: str, ok: bool, detail: str
) -> None:
    """Without an engine, a native-convert backend packs weights for the host's engine."""
    install_backend("enginechip", GOOD + f"\nPLUGIN_FIELDS = {fields}\n")
    results = check_backend("enginechip")
    engine = _only(results, "engine", "enginechip")
    assert (engine.ok, engine.detail.startswith(detail)) == (ok, True), engine.detail
    if not ok:  # the one failure of an otherwise conformant backend
        assert [r for r in results if not r.ok] == [engine]


def test_a_dynamic_pattern_on_activations_alone_counts_as_quantized() -> None:
    """``torch.matmul`` of two activations under a dynamic mapping: the converted graph's
    one quantize op is ``quantize_per_tensor_dynamic`` (no weight, no quantized module),
    and the kit must count it, or it fails a backend that quantizes as declared."""
    from torch.ao.quantization import default_dynamic_qconfig
    from torch.ao.quantization.backend_config import DTypeConfig, ObservationType

    dynamic = DTypeConfig(input_dtype=torch.quint8, output_dtype=torch.float, is_dynamic=True)
    config = BackendConfig("dynamic-matmul").set_backend_pattern_config(
        BackendPatternConfig(torch.matmul)
        .set_observation_type(ObservationType.OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT)
        .add_dtype_config(dynamic)
    )
    results = check_backend_config(
        config, lambda model, is_qat: QConfigMapping().set_global(default_dynamic_qconfig)
    )
    (converted,) = [r for r in results if r.check == "prepare-convert"]
    assert converted.ok and converted.detail.startswith("quantized, SQNR"), converted
