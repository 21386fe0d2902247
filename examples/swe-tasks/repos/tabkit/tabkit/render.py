"""Render rows as a table."""

from tabkit.cells import alignment, format_cell
from tabkit.text import pad, truncate


def _columns(rows, headers):
    ncols = max([len(headers or [])] + [len(r) for r in rows]) if (rows or headers) else 0
    return [[row[i] if i < len(row) else None for row in rows] for i in range(ncols)]


def render(rows, headers=None, *, floatfmt=".2f", missing="", maxwidth=None, sep="  "):
    """Return the table as one string (no trailing newline)."""
    rows = [list(r) for r in rows]
    columns = _columns(rows, headers)
    aligns = [alignment(col) for col in columns]
    widths = []
    for i, col in enumerate(columns):
        texts = ["" if v is None else str(v) for v in col]
        if headers and i < len(headers):
            texts.append(str(headers[i]))
        width = max((len(t) for t in texts), default=0)
        if maxwidth is not None:
            width = min(width, maxwidth)
        widths.append(width)

    def line(cells):
        out = []
        for i, width in enumerate(widths):
            text = cells[i] if i < len(cells) else ""
            if maxwidth is not None:
                text = truncate(text, maxwidth)
            out.append(pad(text, width, aligns[i]))
        return sep.join(out).rstrip()

    lines = []
    if headers:
        lines.append(line([str(h) for h in headers]))
        lines.append(sep.join("-" * w for w in widths))
    for row in rows:
        cells = [format_cell(row[i] if i < len(row) else None, floatfmt, missing) for i in range(len(widths))]
        lines.append(line(cells))
    return "\n".join(lines)
