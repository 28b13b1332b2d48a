"""The oneDNN int8 lowering for TorchInductor: ``qcore.get_lowering("x86")``.

Importing this package changes nothing in Inductor; ``install()`` (or ``with``) does.
"""

from __future__ import annotations

from qinductor_x86.lowering.api import X86Lowering
from qinductor_x86.lowering.report import FloatNode, GraphRecord, LoweringReport

__all__ = [
    "FloatNode",
    "GraphRecord",
    "LoweringReport",
    "X86Lowering",
    "make_lowering",
    "other_x86_passes",
    "switch_off_torch_builtins",
    "torch_carries_x86_passes",
]

_DEFAULT = X86Lowering()


def make_lowering() -> X86Lowering:
    """The process's lowering (one, so that installing it twice is harmless by design)."""
    return _DEFAULT


def switch_off_torch_builtins() -> None:
    """Make torch skip registering its own copy of these passes (standalone mode): on 2.13
    the weight prepack and the lowerings, from 2.14 on the lowerings it still carries.

    Call before the process's first ``torch.compile``: torch registers its copy once, at
    the first compile, and never unregisters it.
    """
    from qinductor_x86 import _torch_private as private

    private.switch_off_builtin_x86_passes()


def torch_carries_x86_passes() -> bool:
    """Whether the installed torch ships its own copy of the x86 int8 weight-prepack and
    fusion passes: torch 2.13 does; from 2.14 on only torchao's copy (registered when its
    x86 quantizer module is imported) and this package's lowering exist."""
    from qinductor_x86 import _torch_private as private

    return private.torch_carries_x86_passes()


def other_x86_passes() -> dict[str, bool]:
    """Which other copies of the x86 int8 passes (torch's, torchao's) are registered now."""
    from qinductor_x86 import _torch_private as private

    return private.builtin_x86_passes()
