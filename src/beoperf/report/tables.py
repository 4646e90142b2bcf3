"""Tables as text: aligned columns for a terminal, pipe tables for Markdown."""

from __future__ import annotations

from collections.abc import Sequence


def aligned(header: Sequence[str], body: list[list[str]], numeric: set[int],
            gap: str = "  ") -> list[str]:
    """Columns padded to their widest cell, numbers (columns in ``numeric``) right-aligned."""
    widths = [max(len(r[i]) for r in [list(header), *body]) for i in range(len(header))]
    lines = []
    for cells in [list(header), *body]:
        parts = [c.rjust(w) if i in numeric else c.ljust(w)
                 for i, (c, w) in enumerate(zip(cells, widths, strict=True))]
        lines.append(gap.join(parts).rstrip())
    return lines


def markdown(header: Sequence[str], body: list[list[str]], numeric: set[int]) -> list[str]:
    """A pipe table (| escaped in cells), numbers right-aligned."""
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    align = ["---:" if i in numeric else "---" for i in range(len(header))]
    return [line(header), line(align), *(line(r) for r in body)]
