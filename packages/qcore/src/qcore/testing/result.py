"""The outcome of one conformance check, shared by the backend and quantizer kits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

#: Called as ``progress(done, total, unit)`` after each subject a kit checks (a pattern,
#: an annotator), so a command can say how far a long check is and how long it has left.
Progress = Callable[[int, int, str], None]


def no_progress(done: int, total: int, unit: str) -> None:
    """The default: checks run silently."""


@dataclass(frozen=True)
class CheckResult:
    """One check on one subject of one plugin.

    ``plugin`` is ``kind:name`` (``backend:onednn``); ``check`` names the rule
    (``well-formed``, ``fuser-method``, ``prepare-convert``, ``annotator``, ...);
    ``subject`` is what it ran on (a pattern, an annotator); ``detail`` says why it failed.
    """

    plugin: str
    check: str
    subject: str
    ok: bool
    detail: str = ""

    def __str__(self) -> str:
        mark = "ok  " if self.ok else "FAIL"
        tail = f": {self.detail}" if self.detail else ""
        return f"{mark} {self.plugin} {self.check} {self.subject}{tail}"
