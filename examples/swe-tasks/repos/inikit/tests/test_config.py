import pytest

from inikit import Config, ConversionError, MissingOptionError, loads

TEXT = """
[server]
port = 8080
ratio = 0.5
debug = yes
tags = web, api, , admin
"""


def test_getint_and_getfloat():
    cfg = loads(TEXT)
    assert cfg.getint("server", "port") == 8080
    assert cfg.getfloat("server", "ratio") == 0.5


def test_getbool_accepts_common_spellings():
    cfg = Config({"f": {"a": "on", "b": "False", "c": "1"}})
    assert [cfg.getbool("f", k) for k in "abc"] == [True, False, True]


def test_getlist_drops_blank_items():
    assert loads(TEXT).getlist("server", "tags") == ["web", "api", "admin"]


def test_missing_option_raises():
    with pytest.raises(MissingOptionError):
        loads(TEXT).get("server", "nope")


def test_missing_option_with_default():
    assert loads(TEXT).getint("server", "workers", default=4) == 4


def test_bad_integer_raises_conversion_error():
    cfg = Config({"s": {"n": "eight"}})
    with pytest.raises(ConversionError):
        cfg.getint("s", "n")
