"""Text helpers: padding and truncation."""

ELLIPSIS = "…"


def truncate(text, width):
    """Cut `text` to at most `width` characters, marking the cut with an ellipsis."""
    if width <= 0:
        return ""
    if len(text) <= width:
        return text
    return text[:width] + ELLIPSIS


def pad(text, width, align="left"):
    if align == "right":
        return text.rjust(width)
    if align == "center":
        return text.center(width)
    return text.ljust(width)
