"""x86 TorchInductor int8 lowerings and the x86 PT2E quantizer for qcore.

Importing this package changes nothing in torch or Inductor: passes are installed only by
``qcore.get_lowering("x86").install()`` (or its context manager). It only lets the modules
it moved in 0.2 import under their old names (one finder, for those names alone).
"""

from qcore.plugins.renamed import keep_old_names
from qinductor_x86._version import __version__

#: Modules moved in 0.2 into ``quantizer/`` (the lowering was already in ``lowering/``),
#: by their new names: each old name still imports, with a DeprecationWarning, until 0.3.
MOVED_IN_0_2 = {
    "qinductor_x86.annotators": "qinductor_x86.quantizer.annotators",
    "qinductor_x86.config": "qinductor_x86.quantizer.config",
    "qinductor_x86.examples": "qinductor_x86.quantizer.examples",
    "qinductor_x86.operators": "qinductor_x86.quantizer.operators",
    "qinductor_x86.passthrough": "qinductor_x86.quantizer.passthrough",
    "qinductor_x86.patterns": "qinductor_x86.quantizer.recipe",
    "qinductor_x86.saturation_warning": "qinductor_x86.quantizer.saturation_warning",
    "qinductor_x86.sources": "qinductor_x86.quantizer.call_sites",
}
keep_old_names(MOVED_IN_0_2, until="qinductor-x86 0.3")

__all__ = ["__version__"]
