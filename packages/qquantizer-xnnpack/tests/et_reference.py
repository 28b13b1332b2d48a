"""Load ExecuTorch 1.5.1's XNNPACK quantizer without importing the rest of ExecuTorch.

``pip install --no-deps executorch==1.5.1`` puts the sources on disk, but importing
``executorch.backends.xnnpack`` pulls in the exporter and its dependencies. The
quantizer needs only two pure-Python helpers from ``xnnpack/utils/utils.py``, so this
module registers empty parent packages, compiles just those two functions out of the
installed file, and loads the two quantizer modules from their installed paths.
Used by the live parity tests, the table generator and the benchmark; never by CI.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

REFERENCE_VERSION = "1.5.1"
_HELPERS = ("get_groups_from_conv", "is_depthwise_conv")


def _package(name: str) -> types.ModuleType:
    module = sys.modules.get(name) or types.ModuleType(name)
    module.__path__ = []  # a package, with nothing importable below it but what we add
    sys.modules[name] = module
    return module


def load() -> types.ModuleType:
    """The reference ``xnnpack_quantizer`` module (XNNPACKQuantizer,
    get_symmetric_quantization_config). Raises if ExecuTorch 1.5.1 is not installed."""
    name = "executorch.backends.xnnpack.quantizer.xnnpack_quantizer"
    if name in sys.modules:
        return sys.modules[name]
    dist = importlib.metadata.distribution("executorch")
    if dist.version != REFERENCE_VERSION:
        raise RuntimeError(f"reference needs executorch=={REFERENCE_VERSION}, found {dist.version}")
    root = Path(str(dist.locate_file("executorch/backends/xnnpack")))
    for pkg in (
        "executorch",
        "executorch.backends",
        "executorch.backends.xnnpack",
        "executorch.backends.xnnpack.quantizer",
        "executorch.backends.xnnpack.utils",
    ):
        _package(pkg)

    utils = types.ModuleType("executorch.backends.xnnpack.utils.utils")
    tree = ast.parse((root / "utils" / "utils.py").read_text())
    helpers = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in _HELPERS]
    import typing

    import torch
    from torchao.quantization.pt2e.utils import _is_conv_node, _is_conv_transpose_node

    namespace: dict[str, Any] = {
        **vars(typing),
        "torch": torch,
        "_is_conv_node": _is_conv_node,
        "_is_conv_transpose_node": _is_conv_transpose_node,
    }
    exec(
        compile(ast.Module(body=helpers, type_ignores=[]), str(root / "utils/utils.py"), "exec"),
        namespace,
    )
    for helper in _HELPERS:
        setattr(utils, helper, namespace[helper])
    sys.modules[utils.__name__] = utils

    for mod in ("xnnpack_quantizer_utils", "xnnpack_quantizer"):
        full = f"executorch.backends.xnnpack.quantizer.{mod}"
        spec = importlib.util.spec_from_file_location(full, root / "quantizer" / f"{mod}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
    return sys.modules[name]
