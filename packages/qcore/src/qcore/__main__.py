"""``qcore`` and ``python -m qcore``: the command line, behind a check of which
distribution owns the installed ``qcore`` files.

The unrelated PyPI library ``qcore`` installs into the same folder; installed over
qcore-torch it replaces some of its modules (``errors.py``, ``__init__.py``), and the
command would die on an ImportError deep in its imports. This module and
``qcore.plugin_api`` import nothing else of qcore, so they still run then, and say what
happened and how to repair it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from qcore.plugin_api import foreign_qcore_reason


def main(argv: Sequence[str] | None = None) -> int:
    try:
        # imported here, not at the top: this import is what fails when the files are
        # theirs, and the failure must become the message below
        from qcore.cli import main as run
    except ImportError:
        reason = foreign_qcore_reason()
        if reason is None:
            raise
        print(f"qcore: error: {reason}", file=sys.stderr)
        return 2
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
