"""Plain-text tables for the CLI: aligned columns, no dependencies."""

from __future__ import annotations

from collections.abc import Sequence


def render_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns separated by two spaces; the last column is not padded."""
    widths = [len(h) for h in header]
    for row in rows:
        for i, cell in enumerate(row[:-1]):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        padded = [c.ljust(w) for c, w in zip(cells[:-1], widths, strict=False)]
        return "  ".join([*padded, cells[-1]]).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])
