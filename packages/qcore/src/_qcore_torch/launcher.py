"""The ``qcore`` command's entry point (see the package docstring for why it is here)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from _qcore_torch.identity import foreign_qcore_reason


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``qcore.cli``, or name the foreign ``qcore`` when its files broke the import."""
    try:
        from qcore.cli import main as run
    except ImportError:
        reason = foreign_qcore_reason()
        if reason is None:
            raise
        print(f"qcore: error: {reason}", file=sys.stderr)
        return 2
    return run(argv)
