"""Progress bars for the demo's long steps (tqdm, from the ``qcore[demo]`` extra)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


def progress(items: Iterable[T], **options: Any) -> Iterator[T]:
    """``tqdm(items)`` on stderr, shown only when stderr is a terminal."""
    from tqdm import tqdm

    yield from tqdm(
        items, file=sys.stderr, leave=False, disable=not sys.stderr.isatty(), **options
    )
