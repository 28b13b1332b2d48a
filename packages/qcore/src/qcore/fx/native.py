"""What a natively converted model needs to run correctly wherever it is called, copied,
saved and loaded.

Facts of torch 2.13's quantized kernels that ``convert_fx`` leaves to the caller:

* torch's fused quantized ``ConvAdd2d`` / ``ConvAddReLU2d`` (oneDNN's ``conv2d_add``)
  write their sum into their second input's buffer. When that tensor is read again (a
  residual used twice, a graph input), the later reader sees the sum, not the tensor:
  silently wrong numbers (about 11 dB on a two-branch block). Such inputs get a copy.
* several fused kernels (``conv2d_add``, ``linear_tanh``, ...) exist for one quantized
  engine only, and torch picks kernels by the process-wide engine at call time, so the
  model raises ``Didn't find engine for operation ...`` under torch's default. The model
  switches to its backend's engine for each call and restores the caller's afterwards.
* a quantized module packs its weights with the *current* engine's prepack whenever they
  are set: on a deep copy, on ``load_state_dict`` and when the model is unpickled
  (``torch.load``). Weights packed under another engine are misread by the backend's
  kernels (a segfault in oneDNN's ``conv2d_add`` on weights packed under ``x86``), so all
  three happen under the model's engine.

:class:`EngineBoundGraphModule` is the ``GraphModule`` that does all this; its behaviour
is in its methods, so a deep copy or a model loaded by ``torch.load`` keeps it (hooks and
closures on an instance are lost on a copy and cannot be pickled).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.ao.nn.intrinsic.quantized as nniq
from torch import nn
from torch.fx import GraphModule, Node

from qcore._torch_private import add_load_state_dict_pre_hook, load_state_dict_pre_hooks
from qcore.int8.engine import quantized_engine as under_engine

__all__ = ["EngineBoundGraphModule", "bind_engine", "copy_summed_inputs"]

#: torch's quantized modules whose kernel sums into ``args[1]`` in place
IN_PLACE_SUMS: tuple[type[nn.Module], ...] = (nniq.ConvAdd2d, nniq.ConvAddReLU2d)


def copy_summed_inputs(gm: GraphModule) -> list[str]:
    """Give every in-place sum a private copy of its summand wherever another reader
    (or the caller, for a graph input) still needs the original. Returns the nodes."""
    guarded = []
    for node in list(gm.graph.nodes):
        if node.op != "call_module" or len(node.args) < 2:
            continue
        if not isinstance(gm.get_submodule(str(node.target)), IN_PLACE_SUMS):
            continue
        summand = node.args[1]
        if not isinstance(summand, Node):
            continue
        if len(summand.users) == 1 and summand.op != "placeholder" and node.args[0] is not summand:
            continue
        with gm.graph.inserting_before(node):
            private = gm.graph.call_method("clone", (summand,))
        node.args = (node.args[0], private, *node.args[2:])
        guarded.append(node.name)
    if guarded:
        gm.recompile()
    return guarded


class EngineBoundGraphModule(GraphModule):
    """A natively converted model bound to quantized engine :attr:`quantized_engine`: it
    runs, is deep-copied, loads a state dict and is unpickled under that engine, and
    restores the caller's engine afterwards (also when the call raises).

    ``torch.save(model, path)`` / ``torch.load(path, weights_only=False)`` round-trip it
    (``weights_only=False``: a graph module is Python code, load only files you trust), and
    so do ``model.state_dict()`` / ``load_state_dict`` into a model converted alike.
    """

    quantized_engine: str

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with under_engine(self.quantized_engine):
            return super().__call__(*args, **kwargs)

    def __deepcopy__(self, memo: dict[int, Any]) -> EngineBoundGraphModule:
        with under_engine(self.quantized_engine):
            copied = super().__deepcopy__(memo)
        return bind_engine(copied, self.quantized_engine)

    def __copy__(self) -> EngineBoundGraphModule:
        return bind_engine(super().__copy__(), self.quantized_engine)

    def __reduce__(self) -> tuple[Any, ...]:
        # torch's reduction: rebuild a plain GraphModule from the code and a copy of the
        # __dict__. The engine switch is pickled first, so that it is in place before that
        # __dict__ (and the packed weights in it) is unpickled; the load-state-dict hooks,
        # which hold this module weakly, travel as functions and are registered again
        rebuild, (body, *rest) = super().__reduce__()
        memo: dict[int, Any] = {}
        body = {
            **body,
            "_modules": {k: _picklable(m, memo) for k, m in self._modules.items()},
            "_load_state_dict_pre_hooks": OrderedDict(),
        }
        hooks = load_state_dict_pre_hooks(self)
        switch = _EngineWhileLoading(self.quantized_engine)
        return (_rebuild_bound, (switch, rebuild, (body, *rest), hooks))

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> Any:
        with under_engine(self.quantized_engine):
            return super().load_state_dict(state_dict, strict=strict, assign=assign)


def bind_engine(gm: GraphModule, name: str) -> EngineBoundGraphModule:
    """Bind ``gm`` to engine ``name``, in place: it becomes an
    :class:`EngineBoundGraphModule`, with everything it holds (modules, metadata, the
    state-dict hooks torch registered on it) unchanged."""
    if not isinstance(gm, EngineBoundGraphModule):
        # every GraphModule has a class of its own, on which torch sets the forward it
        # generates; this one is named like torch's, so that copies find the bound class
        # as their base (torch.fx.GraphModule.__new__ skips classes of that name)
        own = type("GraphModuleImpl", (EngineBoundGraphModule,), {})
        own.__name__ = type(gm).__name__
        gm.__class__ = own
        gm.recompile()
    assert isinstance(gm, EngineBoundGraphModule)
    gm.quantized_engine = name
    return gm


def _picklable(module: nn.Module | None, memo: dict[int, Any]) -> Any:
    """``module``, or a stand-in that unpickles into it where pickle alone cannot: torch
    2.13's quantized convolutions pickle their state as a tuple whose ``__setstate__``
    never initializes ``nn.Module`` (an unpickled one has no ``_modules``; only their
    ``__deepcopy__`` does it right), so they travel as (class, state), and any module
    holding one as (class, attributes, children)."""
    if module is None:
        return None
    if id(module) not in memo:
        state = module.__getstate__()  # type: ignore[no-untyped-call]
        if not isinstance(state, dict):
            memo[id(module)] = _TupleState(type(module), state)
        else:
            children = {k: _picklable(m, memo) for k, m in module._modules.items()}
            if all(children[k] is m for k, m in module._modules.items()):
                memo[id(module)] = module
            else:
                attributes = {k: v for k, v in state.items() if k != "_modules"}
                memo[id(module)] = _WithChildren(type(module), attributes, children)
    return memo[id(module)]


class _TupleState:
    def __init__(self, cls: type[nn.Module], state: Any) -> None:
        self.cls, self.state = cls, state

    def __reduce__(self) -> tuple[Callable[..., nn.Module], tuple[Any, ...]]:
        return (_from_tuple_state, (self.cls, self.state))


class _WithChildren:
    def __init__(self, cls: type[nn.Module], attributes: dict[str, Any], children: dict[str, Any]) -> None:
        self.cls, self.attributes, self.children = cls, attributes, children

    def __reduce__(self) -> tuple[Callable[..., nn.Module], tuple[Any, ...]]:
        return (_with_children, (self.cls, self.attributes, self.children))


def _from_tuple_state(cls: type[nn.Module], state: Any) -> nn.Module:
    """What torch's quantized convs do in ``__deepcopy__``: initialize, then set state."""
    module = cls.__new__(cls)
    nn.Module.__init__(module)
    module.__setstate__(state)  # type: ignore[no-untyped-call]
    return module


def _with_children(
    cls: type[nn.Module], attributes: dict[str, Any], children: dict[str, nn.Module | None]
) -> nn.Module:
    """What pickle does with a module's ``__dict__``, its children given separately."""
    module = cls.__new__(cls)
    module.__setstate__({**attributes, "_modules": children})  # type: ignore[no-untyped-call]
    return module


class _EngineWhileLoading:
    """Unpickled ahead of a bound model's contents: switches to the model's engine, so
    that its weights are packed as they were when it was converted."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __reduce__(self) -> tuple[Callable[[str], _CallersEngine], tuple[str]]:
        return (_switch_engine, (self.name,))


class _CallersEngine:
    """The engine to restore once the model that switched away from it is rebuilt."""

    def __init__(self, previous: str, bound: str) -> None:
        self.previous = previous
        self.bound = bound


def _switch_engine(name: str) -> _CallersEngine:
    supported = torch.backends.quantized.supported_engines
    if name not in supported:
        raise RuntimeError(
            f"this model runs on quantized engine {name!r}, which this torch build lacks: "
            f"{supported}"
        )
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = name
    return _CallersEngine(previous, name)


def _rebuild_bound(
    callers: _CallersEngine,
    rebuild: Callable[..., nn.Module],
    arguments: tuple[Any, ...],
    hooks: list[tuple[Callable[..., Any], bool]],
) -> EngineBoundGraphModule:
    try:
        plain = rebuild(*arguments)
        assert isinstance(plain, GraphModule)
        # torch's rebuild keeps only the attributes a fresh GraphModule lacks: the saved
        # meta and state-dict hooks (in the saved __dict__, argument 0) come back too
        body: dict[str, Any] = arguments[0]
        plain.__dict__.update({k: v for k, v in body.items() if k != "_graph"})
        for hook, with_module in hooks:
            add_load_state_dict_pre_hook(plain, hook, with_module=with_module)
        return bind_engine(plain, callers.bound)
    finally:
        torch.backends.quantized.engine = callers.previous
