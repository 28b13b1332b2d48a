"""The FX-backend half of the conformance kit.

For a backend plugin, loaded through its entry point as users load it:

* ``engine``: a backend converting to torch's native kernels names the engine whose
  kernels it mirrors (``quantized_engine``); one whose kernels run elsewhere converts to
  the reference representation (``reference_convert``), and not both;
* ``well-formed``: every pattern config passes the static rules of ``wellformed``;
* ``fuser-method``: every fuser method, called the way torch's fusion pass calls it,
  returns the fused module the config declares;
* ``prepare-convert``: a model synthesized from every pattern goes through
  ``prepare_fx``, calibration and conversion, and gives finite outputs of the float shape;
  the converted model is quantized (each weighted module became a quantized module and
  each weighted call reads a dequantized weight; a pattern without weights has a quantize
  op or a quantized module) and its output reaches :data:`MIN_SQNR_DB` against the float model's, unless the pattern is declared
  to stay float (``stays_float``), in which case it must stay float;
* ``stays-float``: every pattern declared to stay float is one the backend has.

One CheckResult per pattern and check, so a report names each pattern that fails. A
fuser that raises :class:`~qcore.fx.patterns.UnfusablePattern` declines a fusion it cannot
build exactly (a declared limitation with a fix in its message): both dynamic checks
report it as ok with the detail ``declined: <message>``. Any other exception fails.
"""

from __future__ import annotations

import contextlib
import copy
import io
import math
import warnings
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

import qcore
from qcore.int8.engine import quantized_engine
from qcore.metrics import sqnr
from qcore.plugins.discovery import REGISTRY
from qcore.testing.result import CheckResult, Progress, no_progress

if TYPE_CHECKING:
    from torch import Tensor, nn
    from torch.ao.quantization import QConfigMapping
    from torch.ao.quantization.backend_config import BackendConfig, BackendPatternConfig

    from qcore.testing.patterns import PatternNode

ConvertMode = Literal["reference", "native"]
MappingFactory = Callable[["nn.Module", bool], "QConfigMapping"]

#: The least SQNR (dB) the output of a pattern that quantizes must reach against its
#: float model run on the same rounded inputs. int8 with calibrated observers gives the
#: synthesized models 25-50 dB on every first-party backend (both CPU targets) and the
#: example plugin; the lowest are adaptive average pools, whose outputs keep their
#: input's scale but average a range away (25.1 dB for oneDNN's 3-d one). A wrong scale,
#: zero point or dtype costs far more than the 5 dB of margin.
MIN_SQNR_DB = 20.0

#: Ops for which "not synthesizable" is not a failure. Only Tensor methods that torch's
#: own configs declare but ``torch.Tensor`` does not have (so no runnable model can ever
#: contain them; backends keep them for parity with torch). Any other op the kit cannot
#: build a model for fails ``prepare-convert``, so a backend's coverage is never overstated.
SYNTHESIS_ALLOW_LIST: frozenset[Any] = frozenset({"hardsigmoid", "hardsigmoid_", "leaky_relu"})


def check_backend(
    name: str,
    *,
    convert: ConvertMode = "reference",
    engine: str | None = None,
    stays_float: Collection[str] | None = None,
    min_sqnr_db: float = MIN_SQNR_DB,
    progress: Progress = no_progress,
) -> list[CheckResult]:
    """Every conformance check for FX backend ``name``.

    ``convert="reference"`` (default) runs ``convert_to_reference_fx``, which runs anywhere
    and is what ExecuTorch consumes; ``"native"`` runs ``convert_fx`` under the quantized
    ``engine`` (e.g. ``"onednn"``), restored afterwards. ``stays_float``: the patterns the
    backend's mapping leaves in float; by default what the plugin and its installed
    extensions declare (``BackendPlugin.stays_float``). ``min_sqnr_db``: the floor for
    every other pattern.
    """
    label = f"backend:{name}"
    try:
        config = qcore.get_backend_config(name)
        plugin = REGISTRY.load("backend", name)
        declared = _declared_float(plugin, name) if stays_float is None else stays_float
    except Exception as exc:  # noqa: BLE001 - a plugin that cannot load fails one check
        return [CheckResult(label, "load", name, False, f"{type(exc).__name__}: {exc}")]
    has_mapping = plugin.qconfig_mapping is not None

    def plugin_mapping(model: nn.Module, is_qat: bool) -> QConfigMapping:
        return qcore.get_qconfig_mapping(name, is_qat=is_qat, model=model)

    mapping = plugin_mapping if has_mapping else default_mapping
    loaded = CheckResult(
        label,
        "load",
        name,
        True,
        f"{len(config.configs)} patterns; qconfig mapping: "
        + ("the plugin's own" if has_mapping else "torch's default"),
    )
    checks = check_backend_config(
        config,
        mapping,
        label,
        convert=convert,
        engine=engine,
        stays_float=declared,
        min_sqnr_db=min_sqnr_db,
        progress=progress,
    )
    return [loaded, engine_check(plugin, label), *checks]


def engine_check(plugin: Any, label: str) -> CheckResult:
    """A backend that converts to torch's native kernels must say whose: without
    ``quantized_engine``, ``qcore.fx.convert`` packs weights for whichever engine is
    current (the host's default), whose int8 numerics differ from the target's."""
    import torch

    engines = [e for e in torch.backends.quantized.supported_engines if e != "none"]
    declared = plugin.quantized_engine
    if plugin.reference_convert:
        if declared is not None:
            detail = (
                f"quantized_engine={declared!r} with reference_convert=True: a reference "
                "model runs no engine's kernels; declare one of the two"
            )
            return CheckResult(label, "engine", plugin.name, False, detail)
        detail = "reference representation (reference_convert=True): no engine's kernels"
        return CheckResult(label, "engine", plugin.name, True, detail)
    if declared is None:
        current = torch.backends.quantized.engine
        detail = (
            "converts to torch's native kernels (reference_convert=False) but declares no "
            f"quantized_engine: its weights would be packed for whichever engine is current "
            f"(here {current!r}), whose int8 numerics differ from other engines'. Set "
            f"quantized_engine to the engine whose kernels the backend mirrors (one of "
            f"{', '.join(engines)}), or reference_convert=True if its kernels run elsewhere"
        )
        return CheckResult(label, "engine", plugin.name, False, detail)
    if declared not in engines:
        detail = (
            f"quantized_engine={declared!r} is not an engine of this torch build "
            f"(supported: {', '.join(engines)})"
        )
        return CheckResult(label, "engine", plugin.name, False, detail)
    return CheckResult(label, "engine", plugin.name, True, f"native kernels of {declared!r}")


def _declared_float(plugin: Any, name: str) -> frozenset[str]:
    """The patterns backend ``name`` and its installed extensions declare to stay float."""
    declared = _names(plugin.stays_float)
    for _, extension in REGISTRY.extensions("backend-extension", name):
        declared |= _names(extension.stays_float)
    return declared


def _names(patterns: Collection[str] | str) -> frozenset[str]:
    # one pattern written as a bare string would otherwise count as its characters
    return frozenset([patterns] if isinstance(patterns, str) else patterns)


def default_mapping(model: nn.Module, is_qat: bool) -> QConfigMapping:
    """torch's default mapping, for backends that ship none of their own."""
    from torch.ao.quantization import get_default_qat_qconfig_mapping, get_default_qconfig_mapping

    return get_default_qat_qconfig_mapping() if is_qat else get_default_qconfig_mapping()


def check_backend_config(
    config: BackendConfig,
    mapping: MappingFactory = default_mapping,
    label: str = "backend:<config>",
    *,
    convert: ConvertMode = "reference",
    engine: str | None = None,
    stays_float: Collection[str] = (),
    min_sqnr_db: float = MIN_SQNR_DB,
    progress: Progress = no_progress,
) -> list[CheckResult]:
    """The well-formed, fuser-method, prepare-convert and stays-float checks on a
    BackendConfig; ``stays_float`` names the patterns ``mapping`` leaves in float."""
    from qcore.fx.patterns.text import pattern_text
    from qcore.testing.wellformed import pattern_problems

    declared = _names(stays_float)
    results: list[CheckResult] = []
    seen: dict[str, int] = {}
    with _quiet(), quantized_engine(engine):
        for done, pattern_config in enumerate(config.configs):
            progress(done, len(config.configs), "patterns")
            subject = _subject(pattern_config, pattern_text)
            seen[subject] = seen.get(subject, 0) + 1
            problems = pattern_problems(pattern_config)
            if seen[subject] > 1:
                problems.append("the same pattern is declared more than once")
            results.append(
                CheckResult(label, "well-formed", subject, not problems, "; ".join(problems))
            )
            if problems:
                continue  # the dynamic checks would only restate a broken declaration
            if pattern_config.fuser_method is not None:
                ok, detail = _check_fuser(config, pattern_config)
                results.append(CheckResult(label, "fuser-method", subject, ok, detail))
            ok, detail = _check_prepare_convert(
                config,
                pattern_config,
                mapping,
                convert,
                declared_float=subject in declared,
                min_sqnr_db=min_sqnr_db,
            )
            results.append(CheckResult(label, "prepare-convert", subject, ok, detail))
    # a stale name would let a renamed pattern stay float unnoticed
    stale = "declared to stay float, but the backend has no pattern of that name"
    results += [
        CheckResult(label, "stays-float", name, False, stale)
        for name in sorted(declared - set(seen))
    ]
    return results


def _subject(config: BackendPatternConfig, text: Callable[[Any], str]) -> str:
    try:
        return text(config)
    except Exception:  # noqa: BLE001 - a malformed pattern still needs a name
        return repr(config.to_dict().get("pattern", config.to_dict().get("pattern_complex_format")))


def _one_line(exc: BaseException, limit: int = 300) -> str:
    """torch's dispatcher errors run to pages; a report line needs the first sentence."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0] if lines else ''}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _declined(exc: BaseException) -> str:
    return f"declined: {str(exc).strip()}"


@contextmanager
def _quiet() -> Iterator[None]:
    """torch.ao warns about its own deprecation on every call; the results say what matters."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


# fuser-method ---------------------------------------------------------------------------


def _fuser_arguments(tree: PatternNode, complex_format: bool, train: bool) -> list[Any]:
    """The arguments torch's fusion pass gives a fuser: modules for module nodes, a ReLU
    module for ``F.relu``, the target itself for other functions and methods, and
    MatchAllNode for "any node"; nested root-first for complex-format patterns."""
    import torch.nn.functional as F
    from torch import nn
    from torch.ao.quantization.utils import MatchAllNode

    from qcore.testing.synth import block, row_for

    def instance(op: Any) -> Any:
        if isinstance(op, type) and issubclass(op, nn.Module):
            return block(op, row_for(op)).train(train)
        if op is F.relu:
            return nn.ReLU().train(train)
        return op

    def nested(node: PatternNode | None) -> Any:
        if node is None:
            return MatchAllNode
        if not node.args:
            return instance(node.op)
        return (instance(node.op), *(nested(a) for a in node.args))

    if complex_format:
        return list(nested(tree)) if tree.args else [nested(tree)]
    return [instance(op) for op in tree.ops()]


def _single_module_patterns(config: BackendConfig) -> set[type]:
    from qcore.testing.patterns import pattern_tree

    found: set[type] = set()
    for pattern_config in config.configs:
        try:
            tree = pattern_tree(pattern_config)
        except ValueError:
            continue
        if not tree.args and isinstance(tree.op, type):
            found.add(tree.op)
    return found


def _qat_swappable(config: BackendConfig) -> set[type]:
    """Module classes the backend swaps for a QAT module: only their fusion runs in QAT."""
    found: set[type] = set()
    for pattern_config in config.configs:
        if pattern_config.qat_module is not None and isinstance(pattern_config.pattern, type):
            found.add(pattern_config.pattern)
    return found


def _check_fuser(config: BackendConfig, pattern_config: BackendPatternConfig) -> tuple[bool, str]:
    """QAT fusion must build ``fused_module`` (it is what QAT swaps and trains); it is
    checked when the backend declares a QAT module for that fused module. PTQ fusion may
    fold further (conv+bn into conv) but must give a module the backend quantizes."""
    from qcore.fx.patterns import UnfusablePattern
    from qcore.fx.patterns.text import op_name
    from qcore.testing.patterns import pattern_tree, raw_pattern
    from qcore.testing.synth import NotSynthesizableError

    fuser = pattern_config.fuser_method
    assert fuser is not None
    declared = pattern_config.fused_module
    tree = pattern_tree(pattern_config)
    complex_format = raw_pattern(pattern_config)[1]
    quantizable = _single_module_patterns(config)
    modes = (
        [False, True] if declared is not None and declared in _qat_swappable(config) else [False]
    )
    built: list[str] = []
    for is_qat in modes:
        mode = "qat" if is_qat else "ptq"
        try:
            fused = fuser(is_qat, *_fuser_arguments(tree, complex_format, train=is_qat))
        except NotSynthesizableError as exc:
            return False, f"cannot build the fuser's input modules: {exc}"
        except UnfusablePattern as exc:
            return True, _declined(exc)
        except Exception as exc:  # noqa: BLE001 - the fuser's failure is the finding
            return False, f"{mode} fusion raised {_one_line(exc)}"
        got = type(fused)
        if declared is not None and isinstance(fused, declared):
            built.append(f"{mode}: {op_name(got)}")
            continue
        if is_qat:
            return False, f"qat fusion built {op_name(got)}, fused_module says {op_name(declared)}"
        if got not in quantizable:
            expected = op_name(declared) if declared is not None else "a module with a pattern"
            return False, (
                f"ptq fusion built {op_name(got)}: neither fused_module ({expected}) nor a "
                "module this backend has a pattern for"
            )
        built.append(f"{mode}: {op_name(got)}")
    return True, ", ".join(built)


# prepare-convert ------------------------------------------------------------------------


def _flatten(value: Any) -> list[Tensor]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _flatten(item)]
    return []


def _is_quantized(graph_module: nn.Module) -> bool:
    """Whether conversion left any quantize op or quantized module: a pattern can run and
    still stay float when the mapping's qconfig does not fit its dtype configs."""
    import torch

    quantize_ops = {
        torch.quantize_per_tensor,
        torch.quantize_per_channel,
        torch.quantize_per_tensor_dynamic,
    }
    graph = getattr(graph_module, "graph", None)
    if graph is not None and any(n.target in quantize_ops for n in graph.nodes):
        return True
    return any(
        type(m).__module__.startswith("torch.ao.nn.quantized") for m in graph_module.modules()
    )


def _inputs_as_rounded(converted: nn.Module, inputs: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
    """The model inputs as the converted model's own quantize ops round them.

    The floor measures what a pattern adds, on the inputs it really gets: a pattern fed a
    float model input is observed with its own qconfig, and a fixed-qparams op's (the
    sigmoid's [0, 1)) clamps that input before the op runs, which no real network whose
    producer is quantized does."""
    import operator

    import torch
    from torch.fx import Node

    def value(arg: Any) -> Any:
        if isinstance(arg, Node) and arg.op == "get_attr":
            return operator.attrgetter(str(arg.target))(converted)
        return arg

    graph = getattr(converted, "graph", None)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"] if graph else []
    rounded = list(inputs)
    for index, placeholder in enumerate(placeholders[: len(inputs)]):
        for user in placeholder.users:
            if user.target is torch.quantize_per_tensor:
                scale, zero_point, dtype = (value(a) for a in user.args[1:4])
                quantized = torch.quantize_per_tensor(inputs[index], scale, zero_point, dtype)
                rounded[index] = quantized.dequantize()
                break
    return tuple(rounded)


def _check_prepare_convert(
    config: BackendConfig,
    pattern_config: BackendPatternConfig,
    mapping: MappingFactory,
    convert: ConvertMode,
    *,
    declared_float: bool,
    min_sqnr_db: float,
) -> tuple[bool, str]:
    import torch
    from torch.ao.quantization.quantize_fx import convert_fx, convert_to_reference_fx, prepare_fx

    from qcore.fx.histogram import with_faster_histograms
    from qcore.fx.patterns import UnfusablePattern
    from qcore.testing.left_float import contradiction, float_weighted, unmapped
    from qcore.testing.patterns import pattern_tree
    from qcore.testing.synth import NotSynthesizableError, synthesize

    tree = pattern_tree(pattern_config)
    try:
        case = synthesize(tree)
    except NotSynthesizableError as exc:
        if any(op in SYNTHESIS_ALLOW_LIST for op in tree.ops()):
            return True, f"not synthesizable (allow-listed): {exc}"
        return False, f"not synthesizable: {exc}"

    def inputs() -> tuple[Tensor, ...]:  # fresh copies: some patterns are in-place ops
        return tuple(x.clone() for x in case.example_inputs)

    stage = "qconfig mapping"
    try:
        # torch's histogram observers give way to qcore's twin: the same ranges, found
        # without most of convert's time (qcore.fx.histogram)
        qconfig_mapping = with_faster_histograms(mapping(case.model, False))
        # a failing GraphModule prints its generated source to stderr; the detail suffices
        with torch.no_grad(), contextlib.redirect_stderr(io.StringIO()):
            expected = _flatten(case.model(*inputs()))
            stage = "prepare_fx"
            prepared = prepare_fx(
                copy.deepcopy(case.model), qconfig_mapping, inputs(), backend_config=config
            )
            stage = "calibration"
            prepared(*inputs())
            stage = "convert_fx" if convert == "native" else "convert_to_reference_fx"
            converter = convert_fx if convert == "native" else convert_to_reference_fx
            converted = converter(prepared, backend_config=config)
            stage = "running the converted model"
            actual = _flatten(converted(*inputs()))
    except UnfusablePattern as exc:
        return True, _declined(exc)
    except Exception as exc:  # noqa: BLE001 - the failure is the finding
        return False, f"{stage} raised {_one_line(exc)}"
    if len(actual) != len(expected):
        return False, f"{len(actual)} outputs, the float model gives {len(expected)}"
    for a, e in zip(actual, expected, strict=True):
        if a.shape != e.shape:
            return False, f"output shape {tuple(a.shape)}, float gives {tuple(e.shape)}"
        if a.is_floating_point() and not bool(torch.isfinite(a).all()):
            return False, "non-finite outputs"
    with torch.no_grad():
        reference = _flatten(case.model(*_inputs_as_rounded(converted, inputs())))
    worst = min(
        (sqnr(e, a) for a, e in zip(actual, reference, strict=True) if e.is_floating_point()),
        default=math.inf,
    )
    left = float_weighted(converted)
    if left or not _is_quantized(converted):
        if declared_float:
            return True, f"stays float, as declared (SQNR {worst:.1f} dB)"
        if left:
            found = f"{', '.join(left)} kept a float weight"
        else:
            found = "nothing was quantized (no quantize op, no quantized module)"
        if unmapped(tree.ops(), qconfig_mapping):
            return False, f"left in float by the mapping, and not declared in stays_float: {found}"
        why = contradiction(pattern_config, tree.ops(), qconfig_mapping)
        if why is None:  # the dtypes agree: what FX refused is a finer constraint
            why = (
                "a dtype config has the mapping's dtypes, so one of its constraints (quant "
                "range, scale bounds) refuses the mapping's observers"
            )
        return False, f"{found}: {why}"
    if declared_float:
        return False, f"declared in stays_float, but quantized (SQNR {worst:.1f} dB)"
    if not worst >= min_sqnr_db:  # NaN fails too
        return False, f"quantized, SQNR {worst:.1f} dB, below the floor of {min_sqnr_db:g} dB"
    return True, f"quantized, SQNR {worst:.1f} dB (floor {min_sqnr_db:g} dB)"
