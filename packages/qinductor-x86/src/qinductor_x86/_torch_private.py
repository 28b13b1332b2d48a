"""The only place qinductor-x86 touches private torch / torchao APIs.

Each section belongs to one part of the package; keep edits inside your own section so
that what depends on upstream internals stays easy to audit when torch or torchao move.
"""

from __future__ import annotations

# PT2E quantizer -----------------------------------------------------------------------
from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    # ``node.meta``'s key for a PT2E annotation, from a private torchao module
    from torchao.quantization.pt2e.graph_utils import get_source_partitions as get_source_partitions  # noqa: PLC0414
    from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY as Q_ANNOTATION_KEY  # noqa: PLC0414

#: Names imported on first use (module ``__getattr__`` below), so that importing this
#: module for the lowering loads no torchao.
_LAZY_PT2E_NAMES = {
    "Q_ANNOTATION_KEY": "torchao.quantization.pt2e.quantizer.quantizer",
    # which module or function call each node comes from (not in torchao's public API)
    "get_source_partitions": "torchao.quantization.pt2e.graph_utils",
}


def is_fake_tensor(value: object) -> bool:
    """Whether ``value`` is the FakeTensor export records in ``node.meta["val"]`` (a real
    traced tensor, as opposed to a Python scalar or a symbolic size)."""
    from torch._subclasses import FakeTensor

    return isinstance(value, FakeTensor)


# end PT2E quantizer -------------------------------------------------------------------


# Inductor ------------------------------------------------------------------------------
# Used by qinductor_x86.lowering: Inductor's pattern matcher, its custom-pass hooks, the
# graph normalisations freezing applies, and what the compile context knows about frozen
# parameters. Inductor modules are imported on first use (module ``__getattr__`` below), so
# importing this module for the quantizer costs nothing extra.

import contextlib as _contextlib  # noqa: E402  (sections keep their own imports)
from collections.abc import Callable as _Callable  # noqa: E402
from collections.abc import Iterator as _Iterator  # noqa: E402
from collections.abc import Sequence as _Sequence  # noqa: E402
from typing import Any as _Any  # noqa: E402

if _TYPE_CHECKING:  # the lazily imported names, re-exported for type checkers
    import torch
    from torch._inductor.custom_graph_pass import CustomGraphPass as CustomGraphPass  # noqa: PLC0414
    from torch._inductor.pattern_matcher import Arg as Arg  # noqa: PLC0414
    from torch._inductor.pattern_matcher import CallFunction as CallFunction  # noqa: PLC0414
    from torch._inductor.pattern_matcher import Ignored as Ignored  # noqa: PLC0414
    from torch._inductor.pattern_matcher import KeywordArg as KeywordArg  # noqa: PLC0414
    from torch._inductor.pattern_matcher import ListOf as ListOf  # noqa: PLC0414
    from torch._inductor.pattern_matcher import Match as Match  # noqa: PLC0414
    from torch._inductor.pattern_matcher import PatternExpr as PatternExpr  # noqa: PLC0414
    from torch._inductor.pattern_matcher import PatternMatcherPass as PatternMatcherPass  # noqa: PLC0414
    from torch._inductor.pattern_matcher import fwd_only as fwd_only  # noqa: PLC0414
    from torch._inductor.pattern_matcher import fx_to_pattern as fx_to_pattern  # noqa: PLC0414
    from torch._inductor.pattern_matcher import register_graph_pattern as register_graph_pattern  # noqa: PLC0414

_LAZY_INDUCTOR_NAMES = {
    "CustomGraphPass": "torch._inductor.custom_graph_pass",
    **dict.fromkeys(
        (
            "Arg",
            "CallFunction",
            "Ignored",
            "KeywordArg",
            "ListOf",
            "Match",
            "PatternExpr",
            "PatternMatcherPass",
            "fwd_only",
            "fx_to_pattern",
            "register_graph_pattern",
        ),
        "torch._inductor.pattern_matcher",
    ),
}

#: The Inductor config entries that take custom graph passes, in the order a compile runs
#: them. Each accepts None, one pass, or a list/tuple of passes.
INDUCTOR_HOOKS = ("pre_grad_custom_pass", "joint_custom_pre_pass", "post_grad_custom_post_pass")


def __getattr__(name: str) -> _Any:
    module = _LAZY_INDUCTOR_NAMES.get(name) or _LAZY_PT2E_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


#: Every private torch API the lowering calls, by module: what a torch release must have
#: for this adapter to know it. Checked when the lowering is installed, so that a release
#: that moved one fails there, in one line, not inside a compile.
REQUIRED_FEATURES: dict[str, tuple[str, ...]] = {
    "torch._inductor.config": (*INDUCTOR_HOOKS, "freezing", "pattern_matcher", "layout_optimization"),
    "torch._inductor.custom_graph_pass": ("CustomGraphPass", "get_hash_for_files"),
    "torch._inductor.pattern_matcher": tuple(
        name for name, module in _LAZY_INDUCTOR_NAMES.items() if module.endswith("pattern_matcher")
    ),
    "torch._inductor.fx_passes.joint_graph": ("early_patterns",),
    "torch._inductor.fx_passes.post_grad": ("remove_noop_ops", "view_to_reshape", "pass_patterns"),
    "torch._inductor.fx_passes.freezing_patterns": ("pass_patterns",),
    "torch._inductor.fx_passes.mkldnn_fusion": (),
    "torch._inductor.fx_passes.quantization": (),
    "torch._inductor.freezing_utils": ("maybe_set_is_frozen_param",),
    "torch._inductor.lowering": ("lowerings",),
    "torch._functorch.compile_utils": ("fx_graph_cse",),
    "torch._subclasses.fake_tensor": ("unset_fake_temporarily",),
    "torch._guards": ("TracingContext", "detect_fake_mode"),
    "torch.ao.quantization.fx._decomposed": (),
}


def missing_features() -> list[str]:
    """The entries of :data:`REQUIRED_FEATURES` this torch lacks, as dotted names."""
    import importlib

    missing = []
    for module_name, names in REQUIRED_FEATURES.items():
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            missing.append(module_name)
            continue
        missing += [f"{module_name}.{name}" for name in names if not hasattr(module, name)]
    return missing


def get_hook(name: str) -> _Any:
    """The current value of Inductor config entry ``name`` (one of INDUCTOR_HOOKS)."""
    import torch._inductor.config as inductor_config

    return getattr(inductor_config, name)


def set_hook(name: str, value: _Any) -> None:
    import torch._inductor.config as inductor_config

    setattr(inductor_config, name, value)


def count(key: str, amount: int = 1) -> None:
    """Increment ``torch._dynamo.utils.counters["inductor"][key]``, the counters torch's own
    x86 int8 passes use (tests and tooling read them)."""
    from torch._dynamo.utils import counters

    counters["inductor"][key] += amount


def prepack_qconv(*args: _Any) -> torch.Tensor:
    """oneDNN's int8 conv weight prepack (``onednn::qconv_prepack``), run eagerly on a
    frozen weight as torch's freezing pass runs it."""
    import torch

    packed: torch.Tensor = torch.ops.onednn.qconv_prepack(*args)
    return packed


def prepack_qlinear(weight: torch.Tensor, x_shape: list[int] | None) -> torch.Tensor:
    """oneDNN's int8 linear weight prepack (``onednn::qlinear_prepack``)."""
    import torch

    packed: torch.Tensor = torch.ops.onednn.qlinear_prepack(weight, x_shape)
    return packed


def prepack_linear_fp16(weight: torch.Tensor, x_shape: list[int] | None) -> torch.Tensor:
    """oneDNN's fp16 linear weight prepack (``onednn::linear_prepack_fp16``)."""
    import torch

    packed: torch.Tensor = torch.ops.onednn.linear_prepack_fp16(weight, x_shape)
    return packed


def files_hash(paths: _Sequence[str], extra: str = "") -> bytes:
    """A stable key for Inductor's FX-graph cache: the pass's source files plus ``extra``."""
    from torch._inductor.custom_graph_pass import get_hash_for_files

    return get_hash_for_files(tuple(paths), extra)


def inductor_freezing_active() -> bool:
    """Whether this compile freezes parameters into constants, as Inductor decides it:
    ``config.freezing`` in an inference (no-grad) compile."""
    import torch
    import torch._inductor.config as inductor_config

    return bool(inductor_config.freezing) and not torch.is_grad_enabled()


def normalize_like_freezing(gm: torch.fx.GraphModule, *, joint_patterns: bool = False) -> None:
    """The graph as freezing hands it to its patterns: no-op views removed (the joint
    passes do it), views as reshapes and common subexpressions merged (freezing does it).
    Replaces ``gm.graph``. Each reshape that was a view remembers its input, so that
    :func:`restore_views` can give back the views the rewrites did not touch.

    ``joint_patterns``: also what the joint passes' first patterns do after the custom
    pre-pass (``joint_graph.early_patterns``): a view of a view back to the first one's
    input shape, a permute undone by the next, and a view to the same shape, each removed.
    ``x.add_(y)`` on a 3-D linear output leaves ``add -> view -> view -> relu`` in the
    inference graph; freezing sees ``add -> relu``. They count in torch's counters
    (``removed_pointless_view_pair``) as they would have later, so only on a compile's
    graph, not on a pattern being traced."""
    import torch
    import torch._inductor.config as inductor_config
    from torch._functorch.compile_utils import fx_graph_cse
    from torch._inductor.fx_passes.joint_graph import early_patterns
    from torch._inductor.fx_passes.post_grad import remove_noop_ops, view_to_reshape

    view = torch.ops.aten.view.default
    remove_noop_ops(gm.graph)
    if joint_patterns and inductor_config.pattern_matcher:
        early_patterns.apply(gm.graph)
    for node in gm.graph.find_nodes(op="call_function", target=view):
        node.meta[_WAS_VIEW] = True
    view_to_reshape(gm)  # type: ignore[no-untyped-call]
    gm.graph = fx_graph_cse(gm.graph)
    for node in gm.graph.nodes:
        node.meta[_SEEN] = True
        if node.meta.get(_WAS_VIEW):
            node.meta[_WAS_VIEW] = node.args[0]  # (a node of the new graph)
    gm.recompile()


_WAS_VIEW = "qinductor_x86_was_view_of"
_SEEN = "qinductor_x86_normalized"


def restore_views(gm: torch.fx.GraphModule) -> None:
    """Undo :func:`normalize_like_freezing`'s view -> reshape where the rewrites left the
    view and its input alone. Inductor's joint-graph patterns, which run after this
    lowering and before freezing, match views (scaled-dot-product attention among them);
    freezing turns them into reshapes again for its own patterns.

    A view stays a reshape when a rewrite replaced its input, or when it reads, however
    indirectly, a new node whose layout is not contiguous (a oneDNN conv's channels-last
    output): Inductor propagates fake tensors again before freezing, and the view might
    not be one there."""
    import torch

    reshape, view = torch.ops.aten.reshape.default, torch.ops.aten.view.default
    tainted: set[torch.fx.Node] = set()
    for node in gm.graph.nodes:
        input_node = node.meta.pop(_WAS_VIEW, None)
        value = node.meta.get("val")
        new_layout = not node.meta.pop(_SEEN, False) and isinstance(value, torch.Tensor)
        if any(i in tainted for i in node.all_input_nodes) or (
            new_layout and not value.is_contiguous()
        ):
            tainted.add(node)
        elif node.target is reshape and input_node is not None and input_node is node.args[0]:
            node.target = view
    gm.recompile()


def freezing_clones_conv_weight(weight: torch.Tensor) -> bool:
    """Whether freezing puts a channels-last ``clone`` on this conv weight before torch's
    weight-prepack pattern sees it (which then matches, and counts, one node more).

    ``compile_fx`` calls ``convert_conv_weights_to_channels_last`` when layout optimization
    is on for the graph, which on a oneDNN CPU build it always is for a graph with a conv
    (``GraphLowering.decide_layout_opt``); that clones every 4-D weight not already
    channels-last (a 1x1 or single-input-channel kernel is both layouts at once).
    """
    import torch
    import torch._inductor.config as inductor_config

    if not inductor_config.layout_optimization or weight.dim() != 4:
        return False
    mkldnn = torch.backends.mkldnn
    optimized = inductor_config.force_layout_optimization or (
        mkldnn.enabled and mkldnn.is_available()  # type: ignore[no-untyped-call]
    )
    return bool(optimized) and not weight.is_contiguous(memory_format=torch.channels_last)


def frozen_constants(gm: torch.fx.GraphModule) -> dict[torch.fx.Node, torch.Tensor]:
    """The real value of each graph input that freezing will turn into a constant.

    In the joint graph of an inference compile the leading placeholders are the module's
    parameters and buffers, in the order of ``TracingContext.params_flat_unwrap_subclasses``;
    freezing inlines exactly those (``torch/_inductor/freezing.py``). ``get_attr`` nodes are
    constants already.
    """
    import torch

    values: dict[torch.fx.Node, torch.Tensor] = {}
    context = torch._guards.TracingContext.try_get()
    params = getattr(context, "params_flat_unwrap_subclasses", None) if context else None
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, value in zip(placeholders, params or (), strict=False):
        if isinstance(value, torch.Tensor):
            values[node] = value
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            attr = _attribute(gm, str(node.target))
            if isinstance(attr, torch.Tensor):
                values[node] = attr
    return values


def _attribute(module: _Any, target: str) -> _Any:
    for part in target.split("."):
        module = getattr(module, part, None)
    return module


@_contextlib.contextmanager
def real_tensors() -> _Iterator[None]:
    """Run eager kernels (weight prepacking) inside a compile, outside its fake mode."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    with unset_fake_temporarily():
        yield


def register_constant(gm: torch.fx.GraphModule, name: str, value: torch.Tensor) -> str:
    """Attach ``value`` to ``gm`` as a frozen constant, as freezing attaches its own, under a
    fresh attribute name (returned). Marked frozen, it enters the FX-graph cache key by its
    metadata, as every other frozen weight does."""
    from torch._inductor.freezing_utils import maybe_set_is_frozen_param

    index = 0
    while hasattr(gm, f"{name}{index}"):
        index += 1
    qualname = f"{name}{index}"
    gm.register_buffer(qualname, value)
    maybe_set_is_frozen_param(value)
    return qualname


def fake_value(target: _Callable[..., _Any], args: _Any, kwargs: _Any) -> _Any:
    """``target`` run on the fake values (``meta["val"]``) of its node arguments, in the
    compile's fake mode; real constants (packed weights) are accepted as inputs."""
    import torch
    from torch.fx.node import map_arg

    fake_args = map_arg(args, _meta_value)
    fake_kwargs = map_arg(kwargs, _meta_value)
    fake_mode = torch._guards.detect_fake_mode()
    if fake_mode is None:
        return target(*fake_args, **fake_kwargs)
    allow = fake_mode.allow_non_fake_inputs
    fake_mode.allow_non_fake_inputs = True
    try:
        with fake_mode:
            return target(*fake_args, **fake_kwargs)
    finally:
        fake_mode.allow_non_fake_inputs = allow


def _meta_value(node: torch.fx.Node) -> _Any:
    if node.op == "get_attr":
        return _attribute(node.graph.owning_module, str(node.target))
    return node.meta.get("val")


def makes_new_tensor(node: torch.fx.Node) -> bool:
    """Whether ``node`` calls an ATen-style op whose output is a tensor of its own, not a
    view of (an alias of) one of its inputs: one an in-place post-op may overwrite without
    writing into another tensor. A graph input, a constant, ``getitem`` of a split or an
    unknown callable: no."""
    import torch

    target = node.target
    return (
        node.op == "call_function"
        and isinstance(target, torch._ops.OpOverload)
        and not target.is_view
    )


def quantized_decomposed_ops() -> _Any:
    """``torch.ops.quantized_decomposed``, the q/dq ops of PT2E graphs, registered first
    (torch defines them in a private module that ``import torch`` does not load)."""
    import torch
    import torch.ao.quantization.fx._decomposed

    return torch.ops.quantized_decomposed


def builtin_x86_passes() -> dict[str, bool]:
    """Which other copies of the x86 int8 passes are registered in this process, read from
    Inductor's pattern tables: torch 2.13's own (registered lazily at the first compile from
    ``torch/_inductor/fx_passes/mkldnn_fusion.py``, by the two functions
    :func:`switch_off_builtin_x86_passes` replaces) and torchao's (registered when its x86
    quantizer module is imported). Each is recognised by one handler it always registers."""
    from torch._inductor.fx_passes import freezing_patterns, post_grad

    def registered(passes: _Sequence[_Any], module: str, qualname: str) -> bool:
        return any(
            getattr(handler, "__module__", "").startswith(module)
            and qualname in getattr(handler, "__qualname__", "")
            for pattern_pass in passes
            for entries in pattern_pass.patterns.values()
            for handler in (getattr(entry, "handler", None) for entry in entries)
        )

    torch_module = "torch._inductor.fx_passes.quantization"
    torchao_module = "torchao.quantization.pt2e.inductor_passes"
    prepack = "_register_qconv_weight_prepack_pass"
    return {
        "torch weight prepack and fusion": registered(
            freezing_patterns.pass_patterns, torch_module, prepack
        ),
        "torch lowerings": registered(
            post_grad.pass_patterns, torch_module, "_register_quantized_maxpool2d_lowering"
        ),
        "torchao weight prepack and fusion": registered(
            freezing_patterns.pass_patterns, torchao_module, prepack
        ),
    }


#: torch's two registration functions for its copy of the x86 int8 passes, which
#: ``mkldnn_fusion`` calls at a process's first compile. torch 2.14 dropped the second with
#: the passes it registered (weight prepack, dequant promotion); where a name is absent,
#: that part of torch's copy is simply not there.
_TORCH_REGISTRATIONS = ("_register_quantization_lowerings", "_register_quantization_weight_pack_pass")


def _torch_registration(name: str) -> _Any:
    """torch's registration function ``name``, as ``mkldnn_fusion`` will call it, or None
    where this torch has none (or it was switched off)."""
    from torch._inductor.fx_passes import mkldnn_fusion, quantization

    function = getattr(mkldnn_fusion, name, None)
    return function if function is not None and function is getattr(quantization, name, None) else None


def torch_carries_x86_passes() -> bool:
    """Whether this torch ships its own copy of the x86 int8 weight-prepack and fusion
    passes (2.13 does; 2.14 dropped them, torchao 0.18 carries a copy)."""
    from torch._inductor.fx_passes import quantization

    return hasattr(quantization, "_register_quantization_weight_pack_pass")


def other_x86_copies_in_freezing() -> bool:
    """Whether torch's or torchao's copy of the x86 int8 freezing passes runs in this
    compile's freezing step: torchao's once imported; torch's once registered, or about to be
    (torch 2.13 registers it at the first compile, inside freezing, unless switched off;
    later releases have none)."""
    import torch
    import torch._inductor.config as inductor_config

    registered = builtin_x86_passes()
    torch_will_register = (
        _torch_registration("_register_quantization_weight_pack_pass") is not None
        and bool(inductor_config.cpp.weight_prepack)
        and torch.backends.mkldnn.is_available()  # type: ignore[no-untyped-call]
    )
    return (
        registered["torch weight prepack and fusion"]
        or registered["torchao weight prepack and fusion"]
        or torch_will_register
    )


def switch_off_builtin_x86_passes() -> None:
    """Replace torch's registration functions for its copy of the passes with no-ops (those
    this torch has: both on 2.13, the lowerings alone from 2.14 on).

    Effective only before the process's first compile: torch registers its passes once,
    lazily, and never unregisters them.
    """
    from torch._inductor.fx_passes import mkldnn_fusion

    def _noop() -> None:
        return None

    for name in _TORCH_REGISTRATIONS:
        if _torch_registration(name) is not None:
            setattr(mkldnn_fusion, name, _noop)


class _PatternLowering:
    """A call of op ``op``'s Inductor lowering, as the target of a post-grad graph node.

    torch's x86 passes lower each oneDNN int8 kernel node through a post-grad lowering
    pattern (``register_lowering_pattern``): the node's target becomes the pattern's handler,
    which ``GraphLowering.call_function`` calls directly (it carries
    ``_inductor_lowering_function``), and which calls the op's registered lowering. The IR
    node is the same as from a plain call of the op, but Inductor names the FX node's target
    in the generated code (each extern kernel's ``assert_size_stride`` message), so there
    the handler appears instead of ``torch.ops.onednn.<kernel>``. A target of this class
    makes Inductor take the same route, under a name of its own that spells no op the way
    the code spells its calls (``qinductor_x86.lowering(onednn::qlinear_pointwise.binary)``):
    code scanned for kernel names finds the calls only, as with torch's passes.
    """

    _inductor_lowering_function = True
    # From torch 2.14, Inductor re-derives a node's fake value after the post-grad passes
    # when its inputs changed; a lowering handler says how (its op, on fake tensors), as
    # ``register_lowering_pattern(output_metadata_fn=...)`` does. Earlier releases ignore it.
    _inductor_lowering_output_metadata_ignores_input_storage = True
    _inductor_lowering_output_metadata_is_input = None

    def __init__(self, op: torch._ops.OpOverload, realize: tuple[int, ...]) -> None:
        self.op = op
        self._inductor_lowering_output_metadata_fn = op
        self.realize = realize
        self.label = f"{op.namespace}::{op._opname}.{op._overloadname}"
        # what FX and Inductor read off a call target (its printed graph, the op name of
        # a generated check: ``<first part of __module__>.<str(target)>``)
        self.__name__ = self.__qualname__ = f"lowering_{op.namespace}_{op._opname}_{op._overloadname}"
        self.__module__ = "qinductor_x86.lowering"

    def __call__(self, *args: _Any, **kwargs: _Any) -> _Any:
        from torch._inductor.lowering import lowerings

        for index in self.realize:
            args[index].realize()
        return lowerings[self.op](*args, **kwargs)

    def __repr__(self) -> str:
        return f"lowering({self.label})"


_PATTERN_LOWERINGS: dict[_Any, _PatternLowering] = {}


def lower_as_torch_patterns_do(node: torch.fx.Node, realize: tuple[int, ...] = ()) -> None:
    """Have Inductor lower the call ``node`` (an op with a registered lowering) the way torch's
    post-grad lowering patterns lower the oneDNN int8 kernels of its x86 passes (see
    :class:`_PatternLowering`): same IR, same kernel call, the op's name only in the call.

    ``realize``: the positions of the tensor arguments torch's handler realizes into a
    buffer first (the extra input of a binary post-op; a plain call of the op would have
    them realized by ``GraphLowering``'s ``needs_realized_inputs``, a handler does not)."""
    from torch._inductor.lowering import lowerings

    op = node.target
    if op not in lowerings:
        raise ValueError(f"{op} has no Inductor lowering to call")
    handler = _PATTERN_LOWERINGS.get((op, realize))
    if handler is None:
        handler = _PATTERN_LOWERINGS[op, realize] = _PatternLowering(op, realize)  # type: ignore[arg-type]
    node.target = handler


# end Inductor ---------------------------------------------------------------------------
