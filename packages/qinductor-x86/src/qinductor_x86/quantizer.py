"""Placeholder until the x86 Inductor work (issue 6) lands."""

from __future__ import annotations

from typing import NoReturn


def make_quantizer(**options: object) -> NoReturn:
    raise NotImplementedError(
        "qinductor-x86's quantizer is not implemented in this release (tracked as the x86 Inductor issue)"
    )
