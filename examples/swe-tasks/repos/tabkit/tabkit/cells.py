"""How one value becomes the text of one cell."""


def is_number(value):
    """True for ints and floats, and for strings that spell a number."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    if isinstance(value, str):
        return value.strip().replace(".", "", 1).isdigit()
    return False


def format_cell(value, floatfmt=".2f", missing=""):
    """Text of a cell: floats use `floatfmt`, None becomes `missing`."""
    if value is None:
        return missing
    if isinstance(value, float):
        return format(value, floatfmt)
    return str(value)


def alignment(column_values):
    """Right-align a column whose non-empty values are all numbers; left-align otherwise."""
    present = [v for v in column_values if v is not None and v != ""]
    if present and all(is_number(v) for v in present):
        return "right"
    return "left"
