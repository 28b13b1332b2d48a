"""torchao 0.18's ``X86InductorQuantizer`` module, loaded without its import side effects.

Importing ``torchao.quantization.pt2e.quantizer.x86_inductor_quantizer`` registers
torchao's own x86 Inductor passes into torch, process-wide and for good (a pre-grad
pass and freezing patterns). Tests that lower models must see torch's built-in passes
only, so this loader compiles the installed module's source up to the line where that
registration starts, into a module of its own. The quantizer code is upstream's, byte
for byte; only the registration tail is left out.
"""

from __future__ import annotations

import importlib.metadata
import sys
import types
from pathlib import Path

REFERENCE_VERSION = "0.18.0"
_MODULE = "torchao.quantization.pt2e.quantizer.x86_inductor_quantizer"
_NAME = "torchao_x86_reference"
_REGISTRATION = "# Register Inductor fusion passes"


def load() -> types.ModuleType:
    """The reference module (``X86InductorQuantizer``,
    ``get_default_x86_inductor_quantization_config``), Inductor left untouched."""
    if _NAME in sys.modules:
        return sys.modules[_NAME]
    version = importlib.metadata.version("torchao")
    if version != REFERENCE_VERSION:
        raise RuntimeError(f"the reference is torchao=={REFERENCE_VERSION}, found {version}")
    import torchao.quantization.pt2e.quantizer as package

    path = Path(package.__file__).parent / "x86_inductor_quantizer.py"
    source = path.read_text()
    if source.count(_REGISTRATION) != 1:
        raise RuntimeError(f"{path}: cannot find where pass registration starts")
    module = types.ModuleType(_NAME)
    module.__file__ = str(path)
    sys.modules[_NAME] = module
    exec(compile(source[: source.index(_REGISTRATION)], str(path), "exec"), module.__dict__)
    return module


def load_with_side_effects() -> types.ModuleType:
    """The module exactly as users import it (registers torchao's Inductor passes)."""
    import importlib

    return importlib.import_module(_MODULE)
