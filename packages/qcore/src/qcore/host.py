"""``qcore.host``: the public spelling of :mod:`qcore.int8.cpu_profile` (what the target CPU does
for int8, and how to name another one), as the README and docs write it::

    import qcore.host
    with qcore.host.targeting("avx2"):
        ...

The names are those of :mod:`qcore.int8.cpu_profile`, the same objects: its state (the target
set by :func:`set_target` or :func:`targeting`) is one, whichever spelling sets it.
Importing this module imports no torch.
"""

from qcore.int8 import cpu_profile as _host
from qcore.int8.cpu_profile import *  # noqa: F403  (its names: one list, qcore.int8.cpu_profile.__all__)

__all__ = _host.__all__
