"""The only place qinductor-x86 touches private torch / torchao APIs.

Each section belongs to one part of the package; keep edits inside your own section so
that what depends on upstream internals stays easy to audit when torch or torchao move.
"""

from __future__ import annotations

# PT2E quantizer -----------------------------------------------------------------------


def is_fake_tensor(value: object) -> bool:
    """Whether ``value`` is the FakeTensor export records in ``node.meta["val"]`` (a real
    traced tensor, as opposed to a Python scalar or a symbolic size)."""
    from torch._subclasses import FakeTensor

    return isinstance(value, FakeTensor)


# end PT2E quantizer -------------------------------------------------------------------
