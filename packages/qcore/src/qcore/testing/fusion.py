"""Fusion patterns through torch's real fuse pass, on models synthesized from them.

The fuser-method check calls fuser methods the way torch's fuse handler does; this runs
the handler itself (``fuse_fx``), so what it reports is exactly what a user meets in
``prepare_fx``. Parity tests use it to prove that a pattern they list as an upstream
fuser bug really crashes torch's own config, and that the list misses none.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch import nn
    from torch.ao.quantization.backend_config import BackendConfig, BackendPatternConfig

__all__ = ["fuse_pattern", "fusion_failures"]


def fuse_pattern(config: BackendConfig, pattern_config: BackendPatternConfig) -> nn.Module:
    """``fuse_fx`` with ``config`` on an eval-mode model synthesized from the pattern of
    ``pattern_config``: the fused graph module, or whatever torch's fuse pass raises
    (:class:`~qcore.testing.synth.NotSynthesizableError` if no model can be built)."""
    from torch.ao.quantization.quantize_fx import fuse_fx

    from qcore.testing.patterns import pattern_tree
    from qcore.testing.synth import synthesize

    case = synthesize(pattern_tree(pattern_config))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.ao's deprecation notice on every call
        return fuse_fx(case.model, backend_config=config)


def fusion_failures(config: BackendConfig) -> dict[Any, str]:
    """Every pattern of ``config`` with a fuser method whose fusion fails in torch's fuse
    pass, keyed as :func:`~qcore.fx.patterns.pattern_key` keys it, with the exception's type
    and first line. A pattern no model can be synthesized for is listed too, so nothing
    is left out silently."""
    from qcore.fx.patterns import pattern_key

    failures: dict[Any, str] = {}
    for pattern_config in config.configs:
        if pattern_config.fuser_method is None:
            continue
        try:
            fuse_pattern(config, pattern_config)
        except Exception as exc:  # noqa: BLE001 - the failure is the finding
            lines = str(exc).strip().splitlines()
            failures[pattern_key(pattern_config)] = (
                f"{type(exc).__name__}: {lines[0] if lines else ''}"
            )
    return failures
