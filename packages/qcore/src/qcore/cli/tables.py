"""Plain-text tables for the CLI: aligned columns, no dependencies.

Tables fit a terminal width by wrapping cells rather than cutting them: a pattern, a dtype
list or a reason is only useful whole. Wrapped continuation lines are indented, so a line
that starts in column 0 always starts a row (tests and ``grep`` can count rows).
"""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Mapping, Sequence

#: Narrowest width tables are fitted to, whatever the terminal says: below it every cell
#: would wrap into a column of single words.
MIN_WIDTH = 40
#: Separator between columns.
GAP = "  "
#: Prefix of a wrapped cell's continuation lines.
CONTINUATION = "  "


class _Wrapper(textwrap.TextWrapper):
    """Breaks at spaces, after hyphens (distribution names) and after an opening
    parenthesis, so that a nested pattern such as ``ReLU(torch.add(BatchNorm2d(Conv2d),
    *))`` wraps between its calls."""

    _BREAKS = re.compile(r"(\s+)|(?<=\()|(?<=\w-)(?=\w)")

    def _split(self, text: str) -> list[str]:
        return [chunk for chunk in self._BREAKS.split(text) if chunk]


def terminal_width() -> int:
    """``COLUMNS`` if set, else the terminal's width, else 80 (output to a pipe or file)."""
    return max(MIN_WIDTH, shutil.get_terminal_size((80, 24)).columns)


def wrap_cell(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters.

    Lists written ``a; b; c`` break between items first, so that an item (a dtype config,
    an op) is split only when it alone is wider than the column; a line that continues the
    list starts flush, since the ``;`` ending the line before says that it continues. An
    item is split at spaces, its continuation indented; a word wider than the column is
    cut, as a last resort.
    """
    if len(text) <= width:
        return [text]
    width = max(width, len(CONTINUATION) + 1)
    lines: list[str] = []
    items = text.split("; ")
    for i, item in enumerate(items):
        piece = item + (";" if i < len(items) - 1 else "")
        if lines and i > 0 and len(joined := f"{lines[-1]} {piece}") <= width:
            lines[-1] = joined
            continue
        wrapper = _Wrapper(width, subsequent_indent=CONTINUATION)
        lines += wrapper.wrap(piece) or [""]
    return lines


def longest_word(text: str) -> int:
    """The width below which ``text`` can only be shown by cutting a word."""
    return max((len(w.strip()) for w in _Wrapper()._split(text)), default=0)


def fit_widths(
    natural: Sequence[int], floors: Sequence[int], budget: int
) -> list[int]:
    """Column widths summing to at most ``budget``: narrow the widest column first.

    No column goes below its floor while another is still above its own; past that, the
    widest goes down to ``CONTINUATION`` + a few characters, so that any table fits.
    """
    widths = list(natural)
    for limits in (floors, [len(CONTINUATION) + 4] * len(widths)):
        while sum(widths) > budget:
            shrinkable = [i for i, w in enumerate(widths) if w > limits[i]]
            if not shrinkable:
                break
            widest = max(shrinkable, key=lambda i: widths[i])
            widths[widest] -= 1
    return widths


def render_table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    *,
    width: int | None = None,
    min_widths: Mapping[str, int] | None = None,
) -> str:
    """Left-aligned columns separated by two spaces; lines are right-stripped.

    ``width``: wrap cells so that no line is longer (None: one line per row, whatever its
    length). ``min_widths``: per header, the width below which a column is narrowed only
    once every other column is at its own minimum (default: its longest word, so that
    words are cut only when nothing else fits).
    """
    columns = len(header)
    natural = [
        max([len(header[i]), *(len(row[i]) for row in rows)]) for i in range(columns)
    ]
    if width is None:
        widths = natural
    else:
        wanted = min_widths or {}
        floors = [
            min(
                natural[i],
                max(len(h), wanted.get(h, max(longest_word(row[i]) for row in [header, *rows]))),
            )
            for i, h in enumerate(header)
        ]
        widths = fit_widths(natural, floors, width - len(GAP) * (columns - 1))

    def lines_of(cells: Sequence[str]) -> list[str]:
        wrapped = [wrap_cell(c, w) for c, w in zip(cells, widths, strict=True)]
        height = max(len(w) for w in wrapped)
        out = []
        for k in range(height):
            parts = [
                (cell[k] if k < len(cell) else "").ljust(w)
                for cell, w in zip(wrapped, widths, strict=True)
            ]
            out.append(GAP.join(parts).rstrip())
        return out

    return "\n".join(line for cells in [header, *rows] for line in lines_of(cells))


def render_notes(notes: Sequence[str], width: int | None = None) -> str:
    """``[1] text`` paragraphs, wrapped to ``width`` under a hanging indent."""
    paragraphs = []
    for number, text in enumerate(notes, start=1):
        label = f"[{number}] "
        if width is None:
            paragraphs.append(label + text)
        else:
            paragraphs.append(
                textwrap.fill(
                    text,
                    width,
                    initial_indent=label,
                    subsequent_indent=" " * len(label),
                    break_on_hyphens=False,
                    break_long_words=True,
                )
            )
    return "\n".join(paragraphs)
