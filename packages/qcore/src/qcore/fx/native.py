"""What a natively converted model needs to run correctly wherever it is called.

Two facts of torch 2.13's quantized kernels that ``convert_fx`` leaves to the caller:

* torch's fused quantized ``ConvAdd2d`` / ``ConvAddReLU2d`` (oneDNN's ``conv2d_add``)
  write their sum into their second input's buffer. When that tensor is read again (a
  residual used twice, a graph input), the later reader sees the sum, not the tensor:
  silently wrong numbers (about 11 dB on a two-branch block). Such inputs get a copy.
* several fused kernels (``conv2d_add``, ``linear_tanh``, ...) exist for one quantized
  engine only, and torch picks kernels by the process-wide engine at call time, so the
  model raises ``Didn't find engine for operation ...`` under torch's default. The model
  switches to its backend's engine for each call and restores the caller's afterwards.
* a quantized module's deep copy re-packs its weights with the *current* engine's prepack,
  so a copy made under another engine holds weights the backend's kernels misread (a
  segfault in oneDNN's ``conv2d_add`` when the copy is made under ``x86``). Deep copies are
  made under the backend's engine too.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.ao.nn.intrinsic.quantized as nniq
from torch import nn
from torch.fx import GraphModule, Node

from qcore._torch_private import on_graph_module_deepcopy
from qcore.engine import quantized_engine

__all__ = ["RunUnderEngine", "copy_summed_inputs", "run_under_engine"]

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


class RunUnderEngine:
    """A forward pre-hook and hook pair that run the module under quantized engine
    ``name`` and restore the caller's engine, also when the call raises."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._callers: list[str] = []

    def install(self, module: nn.Module) -> None:
        module.register_forward_pre_hook(self.enter)
        module.register_forward_hook(self.leave, always_call=True)

    def enter(self, module: nn.Module, args: Any) -> None:
        del module, args
        self._callers.append(torch.backends.quantized.engine)
        torch.backends.quantized.engine = self.name

    def leave(self, module: nn.Module, args: Any, output: Any) -> None:
        del module, args, output
        if self._callers:
            torch.backends.quantized.engine = self._callers.pop()


def run_under_engine(gm: GraphModule, name: str) -> RunUnderEngine:
    """Make ``gm`` and its deep copies run, and be deep-copied, under engine ``name``."""
    guard = RunUnderEngine(name)
    guard.install(gm)
    _deepcopy_under_engine(gm, name)

    def bind_copy(copy: GraphModule) -> None:
        RunUnderEngine(name).install(copy)
        _deepcopy_under_engine(copy, name)

    on_graph_module_deepcopy(gm, bind_copy)
    return guard


def _deepcopy_under_engine(gm: GraphModule, name: str) -> None:
    # copy.deepcopy reads ``__deepcopy__`` from the instance, so this binds one model only;
    # the copy gets its own binding from the deep-copy hook (the dict entry it inherits
    # would still point at the original)
    class_deepcopy = type(gm).__deepcopy__

    def deepcopy(memo: dict[int, Any]) -> GraphModule:
        with quantized_engine(name):
            copied: GraphModule = class_deepcopy(gm, memo)
        return copied

    object.__setattr__(gm, "__deepcopy__", deepcopy)
