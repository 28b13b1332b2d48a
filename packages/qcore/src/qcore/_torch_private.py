"""The only place qcore touches private torch / torchao APIs.

Each section belongs to one area of qcore; keep edits inside your section so that the
places that depend on upstream internals stay easy to audit when torch or torchao move.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn
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


def is_fake_tensor(value: object) -> bool:
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

# FX pattern configs (qcore.patterns) --------------------------------------------------
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


# end FX convert -----------------------------------------------------------------------


# Derived PT2E quantizers (qcore.derived) ------------------------------------------------


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
