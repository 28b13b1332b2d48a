"""``python -m qcore``: the same command as ``qcore`` (see ``_qcore_torch``)."""

from __future__ import annotations

import sys

from _qcore_torch.launcher import main

if __name__ == "__main__":
    sys.exit(main())
