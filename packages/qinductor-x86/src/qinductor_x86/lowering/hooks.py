"""Adding a pass to an Inductor custom-pass hook next to whatever is there, and taking it
out again, without ever dropping a pass someone else put there.

Each hook holds None, one pass, or a list of passes (torch runs them in order). Installing
turns the value into a list that ends with ours; uninstalling restores the exact previous
value when nobody changed the hook since, and otherwise removes only our pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qinductor_x86 import _torch_private as private


@dataclass(frozen=True)
class Installed:
    """What one install did to one hook."""

    hook: str
    ours: Any
    before: Any
    after: Any


def add(hook: str, ours: Any) -> Installed:
    before = private.get_hook(hook)
    if before is None:
        after: Any = [ours]
    elif isinstance(before, (list, tuple)):
        after = [*before, ours]
    else:
        after = [before, ours]
    private.set_hook(hook, after)
    return Installed(hook, ours, before, after)


def remove(installed: Installed) -> None:
    current = private.get_hook(installed.hook)
    if current is installed.after:
        private.set_hook(installed.hook, installed.before)
    elif isinstance(current, (list, tuple)) and any(p is installed.ours for p in current):
        rest = [p for p in current if p is not installed.ours]
        private.set_hook(installed.hook, rest or None)
    elif current is installed.ours:
        private.set_hook(installed.hook, None)
    # else: someone replaced the hook's value since, dropping our pass: leave theirs alone

