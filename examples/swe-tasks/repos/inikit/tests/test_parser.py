import pytest

from inikit import ParseError, loads


def test_sections_and_options():
    cfg = loads("[server]\nhost = example.org\nport = 8080\n")
    assert cfg.sections() == ["server"]
    assert cfg.get("server", "host") == "example.org"
    assert cfg.get("server", "port") == "8080"


def test_options_before_first_section_go_to_default_section():
    cfg = loads("name = demo\n[db]\nurl = sqlite://\n")
    assert cfg.get("general", "name") == "demo"


def test_comments_and_blank_lines_are_ignored():
    cfg = loads("# top\n\n[a]\n; note\nx = 1\n")
    assert cfg.to_dict() == {"a": {"x": "1"}}


def test_names_are_case_insensitive():
    cfg = loads("[Server]\nHost = h\n")
    assert cfg.get("SERVER", "host") == "h"


def test_continuation_lines():
    cfg = loads("[a]\nmotd = hello\n  world\n")
    assert cfg.get("a", "motd") == "hello\nworld"


def test_unterminated_header_is_a_parse_error():
    with pytest.raises(ParseError) as info:
        loads("[a\nx = 1\n")
    assert info.value.lineno == 1


def test_line_without_equals_is_a_parse_error():
    with pytest.raises(ParseError) as info:
        loads("[a]\njust words\n")
    assert info.value.lineno == 2
