import pytest

from verspec import InvalidSpecifier, Specifier


def test_range():
    spec = Specifier(">=1.2, <2")
    assert spec.contains("1.2.0")
    assert spec.contains("1.9.9")
    assert not spec.contains("2.0.0")
    assert not spec.contains("1.1.9")


def test_exact_and_exclusion():
    assert Specifier("==1.4").contains("1.4.0")
    assert not Specifier(">=1, !=1.3.0").contains("1.3.0")


def test_caret():
    spec = Specifier("^1.2.3")
    assert spec.contains("1.2.3") and spec.contains("1.99.0")
    assert not spec.contains("2.0.0")


def test_tilde_lower_bound():
    spec = Specifier("~1.2.3")
    assert spec.contains("1.2.3") and spec.contains("1.2.10")
    assert not spec.contains("1.2.2")


def test_prereleases_excluded_unless_asked_for():
    assert not Specifier(">=1.0").contains("1.5.0-rc.1")
    assert Specifier(">=1.5.0-rc.0").contains("1.5.0-rc.1")


def test_filter():
    assert Specifier("<1.1").filter(["1.0.0", "1.0.5", "1.1.0"]) == ["1.0.0", "1.0.5"]


def test_invalid_specifier():
    with pytest.raises(InvalidSpecifier):
        Specifier(">=banana")
