import pytest

from verspec import InvalidVersion, Version


def test_parse_full_version():
    v = Version.parse("1.4.2-beta.3+build.7")
    assert (v.major, v.minor, v.patch, v.pre, v.build) == (1, 4, 2, "beta.3", "build.7")


def test_leading_v_is_accepted():
    assert Version.parse("v2.0.1") == Version(2, 0, 1)


def test_garbage_is_rejected():
    with pytest.raises(InvalidVersion):
        Version.parse("not a version")


def test_ordering_is_numeric():
    assert Version.parse("1.10.0") > Version.parse("1.9.7")


def test_prerelease_identifiers_order():
    assert Version.parse("1.0.0-alpha.2") < Version.parse("1.0.0-alpha.10")
    assert Version.parse("1.0.0-alpha.9") < Version.parse("1.0.0-beta")


def test_build_metadata_is_ignored_in_comparisons():
    assert Version.parse("1.0.0+a") == Version.parse("1.0.0+b")


def test_bump_major_and_patch():
    v = Version.parse("1.4.2")
    assert str(v.bump("major")) == "2.0.0"
    assert str(v.bump("patch")) == "1.4.3"


def test_str_roundtrip():
    assert str(Version.parse("3.1.4-rc.1+g1234")) == "3.1.4-rc.1+g1234"
