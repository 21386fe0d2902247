"""Conversion of raw option strings to Python values."""

from inikit.errors import ConversionError

_BOOLEANS = {
    "1": True,
    "yes": True,
    "true": True,
    "on": True,
    "0": False,
    "no": False,
    "false": False,
    "off": False,
}


def normalize_name(name):
    """Section and option names are compared case-insensitively, ignoring surrounding blanks."""
    return name.strip().lower()


def to_bool(raw):
    return _BOOLEANS[raw.strip().lower()]


def to_int(raw):
    try:
        return int(raw.strip(), 0)
    except ValueError:
        raise ConversionError(f"not an integer: {raw!r}") from None


def to_float(raw):
    try:
        return float(raw.strip())
    except ValueError:
        raise ConversionError(f"not a number: {raw!r}") from None


def to_list(raw, sep=","):
    """Split a list value; blank items are dropped."""
    return [item.strip() for item in raw.split(sep) if item.strip()]
