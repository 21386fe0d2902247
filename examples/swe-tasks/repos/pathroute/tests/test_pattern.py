import pytest

from pathroute.pattern import Pattern


def test_static_pattern():
    assert Pattern("/about").match("/about") == {}
    assert Pattern("/about").match("/about/") is None


def test_typed_placeholders():
    p = Pattern("/users/<int:user_id>/posts/<slug:post>")
    assert p.match("/users/7/posts/hello-world") == {"user_id": 7, "post": "hello-world"}
    assert p.match("/users/x/posts/hello") is None
    assert p.match("/users/7/posts/Hello_World") is None


def test_default_converter_is_one_segment_and_unquotes():
    p = Pattern("/tags/<name>")
    assert p.match("/tags/big%20data") == {"name": "big data"}
    assert p.match("/tags/a/b") is None


def test_bad_patterns():
    with pytest.raises(ValueError):
        Pattern("no-slash")
    with pytest.raises(ValueError):
        Pattern("/<float:x>")
    with pytest.raises(ValueError):
        Pattern("/<a>/<a>")


def test_build_simple():
    assert Pattern("/users/<int:user_id>").build({"user_id": 5}) == "/users/5"
