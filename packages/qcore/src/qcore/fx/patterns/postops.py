"""Functional post-ops as modules: what a fuser builds when torch hands it a function.

torch's FX fusion gives a fuser method the matched *modules*, except for
``call_function`` and ``call_method`` nodes, where it passes ``node.target`` (the function
or the method name) and turns only ``F.relu`` into ``nn.ReLU()``. Fused modules such as
``nni.LinearTanh`` accept modules only, so ``(nn.Linear, torch.tanh)`` crashes in torch's
own oneDNN config. A post-op whose module form takes no parameters is rebuilt exactly as
a fresh module. One whose call carries arguments the fuser never sees (``F.leaky_relu``'s
``negative_slope``: torch passes the target, not the call) cannot be: a default module
would quantize other numerics than the model computes, so the fuser refuses with
:class:`UnfusablePattern` instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from qcore.fx.patterns.rows import ModuleType, Op, describe

__all__ = ["EXACT_MODULE_FORMS", "PARAMETERIZED_FORMS", "UnfusablePattern", "post_op_module"]


class UnfusablePattern(NotImplementedError):
    """A declared fusion that cannot be built exactly from what torch's fusion pass gives
    the fuser method. A deliberate refusal: the message names the pattern and the fix."""


#: Functions and Tensor methods with a module twin that computes the same values and
#: has no parameter a call could set differently (``inplace`` is moot inside a fused
#: module, and torch itself ignores it when it turns ``F.relu`` into ``nn.ReLU()``).
EXACT_MODULE_FORMS: Mapping[Op, ModuleType] = {
    F.relu: nn.ReLU, F.relu_: nn.ReLU, torch.relu: nn.ReLU, torch.relu_: nn.ReLU,
    "relu": nn.ReLU, "relu_": nn.ReLU,
    F.relu6: nn.ReLU6,
    torch.tanh: nn.Tanh, F.tanh: nn.Tanh, "tanh": nn.Tanh, "tanh_": nn.Tanh,
    torch.sigmoid: nn.Sigmoid, F.sigmoid: nn.Sigmoid, "sigmoid": nn.Sigmoid,
    "sigmoid_": nn.Sigmoid,
    F.hardsigmoid: nn.Hardsigmoid, F.hardswish: nn.Hardswish,
    F.silu: nn.SiLU, F.mish: nn.Mish, F.selu: nn.SELU, torch.selu: nn.SELU,
}  # fmt: skip

#: Functions whose calls carry parameters torch does not pass to a fuser, with the module
#: (and its parameters) a model should use instead for the fusion to happen exactly.
PARAMETERIZED_FORMS: Mapping[Op, tuple[ModuleType, tuple[str, ...]]] = {
    F.leaky_relu: (nn.LeakyReLU, ("negative_slope",)),
    F.leaky_relu_: (nn.LeakyReLU, ("negative_slope",)),
    F.hardtanh: (nn.Hardtanh, ("min_val", "max_val")),
    F.hardtanh_: (nn.Hardtanh, ("min_val", "max_val")),
    F.elu: (nn.ELU, ("alpha",)),
    F.elu_: (nn.ELU, ("alpha",)),
    F.celu: (nn.CELU, ("alpha",)),
    F.gelu: (nn.GELU, ("approximate",)),
    F.softplus: (nn.Softplus, ("beta", "threshold")),
}


def _lookup(table: Mapping[Op, Any], op: Any) -> Any:
    try:
        return table.get(op)
    except TypeError:  # an unhashable stand-in is in no table
        return None


def post_op_module(op: Any, *, training: bool, pattern: str) -> nn.Module:
    """``op`` as the module a fused module takes: a module as given; a function or method
    name with an exact module twin as a fresh one in ``training`` mode (the root's, as
    torch does for ``F.relu``); anything else raises :class:`UnfusablePattern`."""
    if isinstance(op, nn.Module):
        return op
    module: ModuleType | None = _lookup(EXACT_MODULE_FORMS, op)
    if module is not None:
        return module().train(training)
    parameterized: tuple[ModuleType, tuple[str, ...]] | None = _lookup(PARAMETERIZED_FORMS, op)
    if parameterized is not None:
        cls, params = parameterized
        raise UnfusablePattern(
            f"pattern {pattern}: cannot fuse {describe(op)} exactly: torch's fusion pass "
            f"gives the fuser the function, not the arguments of its call "
            f"({', '.join(params)}), so a fused module would silently use defaults. Use "
            f"{describe(cls)}({', '.join(p + '=...' for p in params)}) in the model "
            f"instead of calling {describe(op)}"
        )
    raise UnfusablePattern(
        f"pattern {pattern}: cannot fuse {describe(op)}: qcore knows no parameter-free "
        "module that computes it exactly; write the model with the equivalent nn.Module "
        "instead of the function call"
    )
