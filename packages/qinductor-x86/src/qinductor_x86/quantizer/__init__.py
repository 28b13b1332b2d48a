"""The x86 PT2E quantizer: torchao 0.18's x86 Inductor recipe on qcore's registry.

``X86InductorQuantizer`` (and the rest of :mod:`.x86_inductor_quantizer`) resolve here on
first use, so importing a sibling (``recipe``, ``config``) does not import torchao's
quantizer.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from qinductor_x86.quantizer.x86_inductor_quantizer import X86InductorQuantizer

__all__ = ["X86InductorQuantizer"]


def __getattr__(name: str) -> Any:
    # until 0.2 this package was the quantizer module; its names still resolve here
    if name.startswith("__"):
        raise AttributeError(name)
    module = importlib.import_module("qinductor_x86.quantizer.x86_inductor_quantizer")
    try:
        return getattr(module, name)
    except AttributeError:
        raise AttributeError(
            f"module 'qinductor_x86.quantizer' has no attribute {name!r}"
        ) from None
