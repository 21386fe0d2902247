from pathlib import Path

import pytest

from agentflow.config import StrictConfig, apply_overrides, dump_yaml, load_config, read_yaml
from agentflow.errors import ConfigError, UserError


class Inner(StrictConfig):
    step_limit: int = 10
    """Steps."""
    name: str = "x"
    """Name."""


class Outer(StrictConfig):
    agent: Inner = Inner()
    """The agent."""
    tags: list[str] = []
    """Tags."""


def test_overrides_parse_yaml_scalars_and_nest() -> None:
    cfg = load_config(Outer, ["agent.step_limit=25", "tags=[a, b]", "agent.name=coder"])
    assert cfg.agent.step_limit == 25
    assert cfg.tags == ["a", "b"]
    assert cfg.agent.name == "coder"


def test_override_file_then_key_applies_in_order(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text("agent:\n  step_limit: 3\n  name: from-file\n")
    cfg = load_config(Outer, [str(f), "agent.step_limit=7"])
    assert (cfg.agent.step_limit, cfg.agent.name) == (7, "from-file")


@pytest.mark.parametrize("bad", ["=3", "agent..x=1", "novalue"])
def test_bad_override_is_one_line_config_error(bad: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as exc:
        apply_overrides({}, [bad])
    assert "\n" not in str(exc.value)


def test_unknown_key_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"agent\.stepz"):
        load_config(Outer, ["agent.stepz=1"])


def test_wrong_type_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"agent\.step_limit"):
        load_config(Outer, ["agent.step_limit=many"])


def test_malformed_yaml_reports_line(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("a: 1\nb: [unclosed\n")
    with pytest.raises(ConfigError, match=r"line \d+") as exc:
        read_yaml(f)
    assert "\n" not in str(exc.value)


def test_missing_file_is_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not found"):
        read_yaml(tmp_path / "nope.yaml")


def test_dump_round_trips() -> None:
    cfg = load_config(Outer, ["agent.step_limit=4"])
    again = load_config(Outer, base=__import__("yaml").safe_load(dump_yaml(cfg)))
    assert again == cfg
