from tabkit import render
from tabkit.cells import alignment, format_cell, is_number


def test_text_left_numbers_right():
    out = render([["apple", 3], ["kiwi", 12]], headers=["fruit", "qty"])
    assert out.splitlines() == [
        "fruit  qty",
        "-----  ---",
        "apple    3",
        "kiwi    12",
    ]


def test_header_wider_than_values():
    out = render([["a", 1]], headers=["name", "count"])
    assert out.splitlines()[2] == "a         1"


def test_missing_cells():
    out = render([["a", 1], ["b"]], missing="-")
    assert out.splitlines() == ["a  1", "b  -"]


def test_no_rows():
    assert render([], headers=["x"]) == "x\n-"


def test_is_number():
    assert is_number(3) and is_number(2.5) and is_number("42") and is_number("4.5")
    assert not is_number("abc") and not is_number(True) and not is_number(None)


def test_alignment_ignores_empty_cells():
    assert alignment([1, None, "", 3]) == "right"
    assert alignment(["x", 1]) == "left"


def test_format_cell():
    assert format_cell(None, missing="n/a") == "n/a"
    assert format_cell(1.5) == "1.50"
    assert format_cell(7) == "7"
