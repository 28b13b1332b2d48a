"""``qcore.host``: the public spelling of :mod:`qcore.int8.host` (what the target CPU does
for int8, and how to name another one), as the README and docs write it::

    import qcore.host
    with qcore.host.targeting("avx2"):
        ...

The names are those of :mod:`qcore.int8.host`, the same objects: its state (the target
set by :func:`set_target` or :func:`targeting`) is one, whichever spelling sets it.
Importing this module imports no torch.
"""

from qcore.int8.host import (
    ENV_TARGET,
    KNOWN_TARGETS,
    Int8Host,
    parse_target,
    probe,
    set_target,
    target,
    targeting,
)

__all__ = [
    "ENV_TARGET",
    "KNOWN_TARGETS",
    "Int8Host",
    "parse_target",
    "probe",
    "set_target",
    "target",
    "targeting",
]
