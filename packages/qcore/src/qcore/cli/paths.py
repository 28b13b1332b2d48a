"""Files the ``qcore`` command writes, checked before any work starts: ``qcore demo``
trains and measures for minutes, and a mistyped directory must not cost them.

Nothing here imports matplotlib: the check must run on an install without the chart's
packages, where a bad path is still the first thing to report.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from qcore.cli.errors import CommandError

#: What a chart can be saved as: the formats matplotlib's default (Agg) backend writes
#: with matplotlib's own dependencies (``savefig`` picks the format by suffix; pgf needs
#: LaTeX). tests_demo saves a chart in each.
PLOT_SUFFIXES = (
    ".png", ".svg", ".svgz", ".pdf", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".gif",
    ".eps", ".ps",
)  # fmt: skip

_HINT = "nothing has run yet: fix the path and rerun"


def check_output_path(option: str, path: Path, suffixes: Sequence[str] = ()) -> None:
    """Raise :class:`~qcore.cli.errors.CommandError` naming ``option`` and ``path`` unless
    a file can be written there (and, given ``suffixes``, its suffix is one of them)."""

    def refuse(why: str) -> CommandError:
        return CommandError(f"{option} {path}: {why}", _HINT)

    if path.is_dir():
        raise refuse("is a directory; name a file to write")
    if suffixes and path.suffix.lower() not in suffixes:
        found = f"'{path.suffix}' is not" if path.suffix else "a name without a suffix is not"
        raise refuse(f"{found} a format it can be written in ({', '.join(suffixes)})")
    parent = path.parent
    if not parent.exists():
        raise refuse(f"directory {parent} does not exist")
    if not parent.is_dir():
        raise refuse(f"{parent} is not a directory")
    if path.exists() and not os.access(path, os.W_OK):
        raise refuse("the file exists and is read-only")
    try:  # os.access answers yes to root for every directory; creating a file tells
        with tempfile.TemporaryFile(dir=parent):
            pass
    except OSError as exc:
        raise refuse(f"cannot write in {parent} ({exc.strerror or exc})") from exc


def check_distinct(paths: dict[str, Path | None]) -> None:
    """Two options naming one file would overwrite each other's output."""
    seen: dict[Path, str] = {}
    for option, path in paths.items():
        if path is None:
            continue
        key = path.resolve()
        if key in seen:
            raise CommandError(f"{seen[key]} and {option} both name {path}", _HINT)
        seen[key] = option
