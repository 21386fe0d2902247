"""A small repository for synth's tests: a package whose functions its own tests check."""

from __future__ import annotations

from pathlib import Path

CORE = '''\
"""Small functions with tests that catch most single-site bugs."""


def clamp(value, low, high):
    if value < low:
        return low
    if value > high:
        return high
    return value


def chunk(items, size):
    out = []
    for start in range(0, len(items), size):
        out.append(items[start:start + size])
    return out


def pad(text, width, fill=" "):
    missing = width - len(text)
    if missing <= 0:
        return text
    return text + fill * missing


def count_words(text, min_len=1):
    words = [w for w in text.split() if len(w) >= min_len]
    return len(words)


def is_sorted(items, strict=False):
    for a, b in zip(items, items[1:]):
        if strict and a >= b:
            return False
        if a > b:
            return False
    return True


def first_index(items, wanted):
    index = 0
    for item in items:
        if item == wanted:
            return index
        index += 1
    return -1
'''

TESTS = '''\
from minipkg.core import chunk, clamp, count_words, first_index, is_sorted, pad


def test_clamp_inside():
    assert clamp(5, 0, 10) == 5


def test_clamp_low():
    assert clamp(-3, 0, 10) == 0


def test_clamp_high():
    assert clamp(12, 0, 10) == 10


def test_clamp_edges():
    assert clamp(0, 0, 10) == 0
    assert clamp(10, 0, 10) == 10


def test_chunk():
    assert chunk([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]


def test_pad():
    assert pad("ab", 4) == "ab  "


def test_pad_fill():
    assert pad("ab", 3, "*") == "ab*"


def test_pad_long():
    assert pad("abcdef", 3) == "abcdef"


def test_count_words():
    assert count_words("a bb ccc") == 3


def test_count_words_min_len():
    assert count_words("a bb ccc", min_len=2) == 2


def test_is_sorted():
    assert is_sorted([1, 2, 2, 3])
    assert not is_sorted([2, 1])


def test_is_sorted_strict():
    assert not is_sorted([1, 1], strict=True)
    assert is_sorted([1, 2], strict=True)


def test_first_index():
    assert first_index(["a", "b", "c"], "c") == 2


def test_first_index_missing():
    assert first_index(["a"], "z") == -1
'''


def write_repo(root: Path, *, src_layout: bool = False) -> Path:
    """The fixture repository under `root` (flat, or with the package under `src/`)."""
    pkg = root / ("src/minipkg" if src_layout else "minipkg")
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""minipkg."""\n')
    (pkg / "core.py").write_text(CORE)
    (root / "tests").mkdir()
    (root / "tests" / "test_core.py").write_text(TESTS)
    (root / "setup.py").write_text("from setuptools import setup\n\nsetup(name='minipkg', version=1 + 0)\n")
    return root


def write_uncaught_repo(root: Path) -> Path:
    """A package whose one function no test calls: every candidate goes uncaught."""
    (root / "lonely").mkdir(parents=True)
    (root / "lonely" / "__init__.py").write_text("def double(x):\n    return x * 2\n")
    (root / "test_lonely.py").write_text("def test_truth():\n    assert 1 + 1 == 2\n")
    return root
