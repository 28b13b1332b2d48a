"""Switch torch's quantized engine for a block and always restore it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def quantized_engine(name: str | None) -> Iterator[None]:
    """Run the block under quantized engine ``name`` (``None`` leaves it as it is).

    The engine is process-global state: a test or check that changed it and failed
    would otherwise change the numerics of everything after it. An engine this torch
    build lacks is a ``RuntimeError`` naming it and the ones it has.
    """
    import torch

    previous = torch.backends.quantized.engine
    if name is not None:
        supported = torch.backends.quantized.supported_engines
        if name not in supported:
            raise RuntimeError(f"quantized engine {name!r} is not in this torch build: {supported}")
        torch.backends.quantized.engine = name
    try:
        yield
    finally:
        torch.backends.quantized.engine = previous
