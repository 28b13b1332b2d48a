"""``python -m qcore.cli``: the ``qcore`` command, as tests and the docs run it."""

from __future__ import annotations

import sys

from qcore.cli import main

if __name__ == "__main__":
    sys.exit(main())
