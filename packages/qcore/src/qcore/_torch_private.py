"""The only place qcore touches private torch / torchao APIs.

Each section belongs to one area of qcore; keep edits inside your section so that the
places that depend on upstream internals stay easy to audit when torch or torchao move.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:
    from torch import Tensor, nn
    from torch.fx import GraphModule

# PT2E ---------------------------------------------------------------------------------

#: The ``node.meta`` key PT2E annotations live under. torchao defines it in a module it
#: does not export (``torchao.quantization.pt2e.quantizer.quantizer``); it is spelled here
#: so that importing it needs no torchao, and ``tests/test_torch_private.py`` checks it
#: against torchao's.
Q_ANNOTATION_KEY = "quantization_annotation"


def aten_pattern_graph(pattern: Callable[..., Any], example_inputs: tuple[Any, ...]) -> GraphModule:
    """Export ``pattern`` to the aten graph PT2E sees, for subgraph matching (conv-bn).

    torchao keeps this helper private; its public replacement does not exist yet.
    """
    from torchao.quantization.pt2e.utils import _get_aten_graph_module_for_pattern

    graph: GraphModule = _get_aten_graph_module_for_pattern(pattern, example_inputs)
    return graph


_PATTERN_EXPORTER = "_get_aten_graph_module_for_pattern"
#: torchao's modules that call its pattern exporter by a name bound at their import
_PATTERN_EXPORT_USERS = (
    "torchao.quantization.pt2e.utils",
    "torchao.quantization.pt2e.qat_utils",
    "torchao.quantization.pt2e.reference_representation_rewrite",
)


def _pattern_key(pattern: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What a pattern's exported graph depends on: its code, what its closure and defaults
    hold, and the shapes and dtypes (never the values) of its example inputs; ``None``
    where something else could matter (then nothing is reused)."""
    import torch

    def spec(value: object) -> object:
        if isinstance(value, torch.Tensor):
            return ("tensor", tuple(value.shape), value.dtype, value.device.type)
        if value is None or isinstance(value, (bool, int, float, str, torch.dtype)):
            return value
        if isinstance(value, (tuple, list)):
            return tuple(spec(v) for v in value)
        if callable(value) and hasattr(value, "__qualname__"):
            return value
        raise TypeError(type(value).__name__)

    wrapper = None
    if isinstance(pattern, torch.nn.Module):  # torchao wraps each pattern function in one
        fn = getattr(pattern, "fn", None)
        if fn is None or any(True for _ in pattern.parameters()) or any(True for _ in pattern.buffers()):
            return None
        wrapper, pattern = type(pattern), fn
    code = getattr(pattern, "__code__", None)
    if code is None:
        return None
    try:
        cells = tuple(spec(c.cell_contents) for c in getattr(pattern, "__closure__", None) or ())
        defaults = spec(getattr(pattern, "__defaults__", None) or ())
        inputs = spec(args)
        named = tuple(sorted((k, spec(v)) for k, v in kwargs.items()))
    except (TypeError, ValueError):  # an empty cell, or a value this key cannot describe
        return None
    return (wrapper, code, cells, defaults, inputs, named)


def _traced_pattern(
    pattern: nn.Module, example_inputs: tuple[Any, ...], kwargs: dict[str, Any]
) -> GraphModule:
    """torchao's graph of a rewrite pattern, as ``_get_aten_graph_module_for_pattern`` makes
    it, traced without Dynamo. torchao exports each pattern with strict ``torch.export``
    (about 0.3 s each, ~40 per QAT model with a conv-bn); a non-strict export of these
    straight-line tensor functions gives the same aten graph, op for op and argument for
    argument (``tests/test_torch_private.py``), in about a fifth of the time, once the
    guard check that ``.module()`` adds is dropped."""
    import torch

    graph: GraphModule = torch.export.export(pattern, example_inputs, kwargs, strict=False).module()
    for node in list(graph.graph.nodes):
        if node.op == "call_module" and node.target == "_guards_fn" and not node.users:
            graph.graph.erase_node(node)
    if hasattr(graph, "_guards_fn"):
        delattr(graph, "_guards_fn")
    graph.graph.eliminate_dead_code()
    # as torchao: .module() copies mutated inputs back, which a pattern never needs
    for node in list(graph.graph.nodes):
        if node.op == "call_function" and node.target == torch.ops.aten.copy_.default and not node.users:
            graph.graph.erase_node(node)
    graph.graph.eliminate_dead_code()
    graph.recompile()
    return graph


#: The exported pattern graphs, by :func:`_pattern_key`, for the whole process: a block
#: nested in another (the conformance kit's, inside a test session's) reuses what any
#: block exported before, since a graph depends on nothing the key leaves out.
_EXPORTED_PATTERNS: dict[Any, GraphModule] = {}


@contextlib.contextmanager
def reused_pattern_graphs() -> Iterator[None]:
    """Within the block, torchao exports each of its fixed rewrite patterns once.

    ``prepare_qat_pt2e`` and ``convert_pt2e`` re-export about 30 small conv-bn patterns
    with strict ``torch.export`` (Dynamo) on every call on a model with batch norms, a
    second or more each, though a pattern's graph depends only on its code and its example
    inputs' shapes: the graph is kept per pattern (traced without Dynamo:
    :func:`_traced_pattern`) and each caller gets its own copy."""
    import copy
    import importlib

    import torch

    modules = [importlib.import_module(name) for name in _PATTERN_EXPORT_USERS]
    original = getattr(modules[0], _PATTERN_EXPORTER)
    kept = _EXPORTED_PATTERNS

    def exported(pattern: Callable[..., Any], example_inputs: tuple[Any, ...],
                 is_cuda: bool = False, **kwargs: Any) -> GraphModule:  # fmt: skip
        key = _pattern_key(pattern, (example_inputs, is_cuda), kwargs)
        if key is None:
            graph: GraphModule = original(pattern, example_inputs, is_cuda, **kwargs)
            return graph
        if key not in kept:
            kept[key] = (
                _traced_pattern(pattern, example_inputs, kwargs)
                if isinstance(pattern, torch.nn.Module) and not is_cuda
                else original(pattern, example_inputs, is_cuda, **kwargs)
            )
        return copy.deepcopy(kept[key])

    # (``inspect.unwrap`` reaches torchao's own through nested blocks)
    functools.update_wrapper(exported, original)
    bound = [getattr(module, _PATTERN_EXPORTER) for module in modules]
    qat_utils = modules[1]
    helpers = {name: getattr(qat_utils, name) for name in _CONV_BN_HELPERS}
    for module in modules:
        setattr(module, _PATTERN_EXPORTER, exported)
    for name, helper in helpers.items():
        setattr(qat_utils, name, _only_for_convs_present(helper))
    try:
        yield
    finally:
        for module, function in zip(modules, bound, strict=True):
            setattr(module, _PATTERN_EXPORTER, function)
        for name, helper in helpers.items():
            setattr(qat_utils, name, helper)


#: torchao's QAT passes that rewrite conv-bn for one conv function each (conv1d, conv2d,
#: conv_transpose1d, conv_transpose2d), all four called on every model with a batch norm
_CONV_BN_HELPERS = ("_fuse_conv_bn_qat_helper", "_fold_conv_bn_qat_helper")


def _only_for_convs_present(helper: Callable[..., Any]) -> Callable[..., Any]:
    """``helper`` for a conv function the graph never calls matches nothing, yet exports
    its dozen patterns first: skipped then, but only where the graph calls some other conv
    function by name (that helper still runs, and with it the dequantize duplication and
    clean-up every helper does first and last), and never where a generic
    ``convolution`` op could hide one."""

    def run(m: GraphModule, conv_fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        called = {str(getattr(n.target, "__name__", n.target)).split(".")[0]
                  for n in m.graph.nodes if n.op == "call_function"}  # fmt: skip
        convs = {name for name in called if "conv" in name}
        named = {"conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d"}
        if convs and convs <= named and conv_fn.__name__ not in convs:
            return m
        return helper(m, conv_fn, *args, **kwargs)

    return run


def named_subgraph_matcher(pattern: GraphModule, *, ignore_literals: bool) -> Any:
    """torch's subgraph matcher whose matches name their nodes (``match.name_node_map``),
    as the pattern's returned dict names them; torch keeps it in an internal module
    (``torch.fx.passes.utils.matcher_with_name_node_map_utils``)."""
    from torch.fx.passes.utils.matcher_with_name_node_map_utils import (
        SubgraphMatcherWithNameNodeMap,
    )

    return SubgraphMatcherWithNameNodeMap(pattern, ignore_literals=ignore_literals)


def fold_batch_norms(graph: GraphModule) -> None:
    """Fold eval-mode batch norms into the conv / linear before them, in place, exactly as
    ``prepare_pt2e`` does before it annotates (torchao keeps these steps private)."""
    from torchao.quantization.pt2e.utils import _fuse_conv_bn_, _fuse_linear_bn_

    _fuse_conv_bn_(graph)
    _fuse_linear_bn_(graph)


def is_fake_tensor(value: object) -> TypeGuard[Tensor]:
    """Whether ``value`` is the FakeTensor export records in ``node.meta["val"]``."""
    from torch._subclasses import FakeTensor

    return isinstance(value, FakeTensor)


def annotation_is_claimed(annotation: Any) -> bool:
    """Whether an annotator has claimed the node (torchao's ``_annotated`` flag, the field
    every upstream quantizer uses to keep a later annotator off an earlier one's node)."""
    return bool(getattr(annotation, "_annotated", False))


def claim_annotation(annotation: Any) -> None:
    """Set torchao's ``_annotated`` flag: no later annotator may take this node."""
    annotation._annotated = True


# end PT2E -----------------------------------------------------------------------------

# FX pattern configs (qcore.fx.patterns) --------------------------------------------------
# BackendPatternConfig keeps these fields behind underscore setters; the builder derives
# their values from a pattern's shape and sets them here only.


def ensure_backend_config_utils() -> None:
    """Import the module ``BackendConfig.set_backend_pattern_config`` reaches by attribute.

    torch 2.13 looks up ``torch.ao.quantization.backend_config.utils`` as an attribute of
    its package without importing it, so building a config fails in a fresh interpreter.
    """
    import torch.ao.quantization.backend_config.utils  # noqa: F401


def set_pattern_complex_format(config: Any, pattern: Any) -> None:
    config._set_pattern_complex_format(pattern)


def set_root_node_getter(config: Any, getter: Callable[..., Any]) -> None:
    config._set_root_node_getter(getter)


def set_extra_inputs_getter(config: Any, getter: Callable[..., Any]) -> None:
    config._set_extra_inputs_getter(getter)


def set_input_type_to_index(config: Any, mapping: dict[str, int]) -> None:
    config._set_input_type_to_index(mapping)


def set_num_tensor_args_to_observation_type(config: Any, mapping: dict[int, Any]) -> None:
    config._set_num_tensor_args_to_observation_type(mapping)


# end FX pattern configs ---------------------------------------------------------------


# FX convert (qcore.fx.native) ------------------------------------------------------------


def load_state_dict_pre_hooks(module: nn.Module) -> list[tuple[Callable[..., Any], bool]]:
    """``module``'s load-state-dict pre-hooks as (function, whether it is called with the
    module): torch keeps them in ``_WrappedHook`` objects that hold the module weakly."""
    wrapped: list[Any] = list(module._load_state_dict_pre_hooks.values())
    return [(hook.hook, bool(hook.with_module)) for hook in wrapped]


def add_load_state_dict_pre_hook(
    module: nn.Module, hook: Callable[..., Any], *, with_module: bool
) -> None:
    """Register ``hook`` as ``register_load_state_dict_pre_hook`` does (``with_module``)
    or as the older form that is called without the module."""
    module._register_load_state_dict_pre_hook(hook, with_module=with_module)  # type: ignore[no-untyped-call]


def is_fused_module(module: object) -> TypeGuard[nn.Sequential]:
    """Whether ``module`` is one of torch's fused modules (``ConvReLU2d``, ``LinearReLU``,
    ...), a sequence of the modules it fuses: torch keeps their base class private."""
    from torch.ao.nn.intrinsic.modules.fused import _FusedModule

    return isinstance(module, _FusedModule)


# end FX convert -----------------------------------------------------------------------


# Derived PT2E quantizers (qcore.pt2e.derived) ------------------------------------------------


def observer_constructor_parts(ctr: Any) -> tuple[Any, dict[str, Any]]:
    """The class and keywords of an observer constructor made by ``with_args`` (torch's
    ``_PartialWrapper`` keeps them in its ``p`` partial); a plain class has none."""
    func: Any = ctr
    keywords: dict[str, Any] = {}
    # with_args on a with_args constructor nests them (qcore's safe-range QAT weights do);
    # the outer keywords win, as they do when the constructor runs
    while isinstance(getattr(func, "p", func), functools.partial):
        partial = getattr(func, "p", func)
        func, keywords = partial.func, {**dict(partial.keywords or {}), **keywords}
    return func, keywords


# end derived PT2E quantizers -----------------------------------------------------------


# Compiling (qcore.demo) ----------------------------------------------------------------


@contextlib.contextmanager
def inductor_freezing() -> Iterator[None]:
    """Inductor's ``freezing`` on inside the block (weights become constants, which the
    int8 lowerings need); torch keeps the switch in ``torch._inductor.config``."""
    import torch._inductor.config as inductor_config

    previous = inductor_config.freezing
    inductor_config.freezing = True
    try:
        yield
    finally:
        inductor_config.freezing = previous


# end compiling ------------------------------------------------------------------------


# Accuracy-driven tuning (qcore.tuning) -------------------------------------------------


def fx_node_scopes(prepared: GraphModule) -> dict[str, tuple[str, Any]]:
    """Node name -> (module path, module type) that ``prepare_fx`` recorded while tracing
    (``_ObservedGraphModuleAttrs.node_name_to_scope``; torch keeps it in a private meta
    key). The tuner addresses a function call by its module path and call order."""
    attrs = prepared.meta.get("_observed_graph_module_attrs")
    scopes: dict[str, tuple[str, Any]] = dict(getattr(attrs, "node_name_to_scope", {}) or {})
    return scopes


# end accuracy-driven tuning ------------------------------------------------------------


def histogram_range_error(observer: Any, start_bin: int, end_bin: int) -> Any:
    """The L2 quantization error of a histogram observer's histogram with its range cut to
    bins ``[start_bin, end_bin]`` (the private ``_compute_quantization_error`` of torch.ao's
    ``HistogramObserver`` and of torchao's copy). ``qcore.int8.histogram_search`` walks the
    range search both override (their private ``_non_linear_param_search``) and calls this
    for each candidate range; the names are torch 2.13 - 2.15's and torchao 0.18's."""
    return observer._compute_quantization_error(start_bin, end_bin)
