from tabkit.text import pad, truncate


def test_truncate_keeps_short_text():
    assert truncate("kiwi", 10) == "kiwi"


def test_truncate_zero_width():
    assert truncate("kiwi", 0) == ""


def test_pad():
    assert pad("ab", 4) == "ab  "
    assert pad("ab", 4, "right") == "  ab"
    assert pad("ab", 4, "center") == " ab "
