"""RepairConfig in sections: every flat name of an earlier version (`RENAMED`) still lands at its new path, from
Python, a config file and `-c`, with one warning naming the path; the strategies are the search's names."""

from __future__ import annotations

import json
import typing
import warnings
from pathlib import Path
from typing import Any

import pytest

from agentflow.errors import ConfigError
from agentflow.repair import config as repair_config
from agentflow.repair.config import RENAMED, RenamedSettingWarning, RepairConfig, load_repair_config

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "examples" / "swe-tasks" / "tasks.jsonl"
MAX_TOP_LEVEL = 25
"""Issue #51's bar for the run's settings."""


def other_value(path: str) -> Any:
    """A valid value of the setting at `path` that is not its default (so landing there is seen)."""
    field = _field(path)
    default = field.get_default(call_default_factory=True)
    annotation = field.annotation
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    literal = next((a for a in [annotation, *args] if typing.get_origin(a) is typing.Literal), None)
    if literal is not None:
        return next(v for v in typing.get_args(literal) if v != default)
    if annotation is bool:
        return not default
    if annotation is int or int in args:
        return (default or 1) + 1
    if annotation is float or float in args:
        return round((default or 1.0) * 0.5 + 0.05, 3)
    if typing.get_origin(annotation) is list:
        return ["STOP_HERE"]
    if annotation is str or str in args:
        return "test:echo"
    raise AssertionError(f"no sample value for {path} ({annotation})")


def _field(path: str) -> Any:
    section, leaf = path.split(".")
    cls = RepairConfig.model_fields[section].annotation
    assert isinstance(cls, type)
    return cls.model_fields[leaf]  # type: ignore[attr-defined]


def at(cfg: RepairConfig, path: str) -> Any:
    section, leaf = path.split(".")
    return getattr(getattr(cfg, section), leaf)


@pytest.fixture
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each spelling warns once per process: a test of the warning starts with none given yet."""
    monkeypatch.setattr(repair_config, "_warned", set())


def renamed_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, RenamedSettingWarning)]


def test_the_run_has_at_most_25_top_level_settings_and_each_moved_one_a_path() -> None:
    assert len(RepairConfig.model_fields) <= MAX_TOP_LEVEL
    for old, new in RENAMED.items():
        assert old not in RepairConfig.model_fields, old
        assert _field(new).description, f"{new} has no docstring"


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_a_flat_name_lands_at_its_path_with_one_warning_from_every_entry_point(
        old: str, tmp_path: Path, fresh_warnings: None, monkeypatch: pytest.MonkeyPatch) -> None:
    new = RENAMED[old]
    value = other_value(new)
    config_file = tmp_path / "old.yaml"
    config_file.write_text(f"{old}: {json.dumps(value)}\n")
    makers = {
        "python": lambda: RepairConfig(**{old: value}),
        "model_validate": lambda: RepairConfig.model_validate({old: value}),
        "config file": lambda: load_repair_config([str(config_file)]),
        "-c": lambda: load_repair_config([f"{old}={json.dumps(value)}"]),
    }
    for how, make in makers.items():
        monkeypatch.setattr(repair_config, "_warned", set())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cfg = make()
            again = make()  # the same spelling a second time: no second warning
        assert at(cfg, new) == value and at(again, new) == value, how
        said = renamed_warnings(caught)
        assert len(said) == 1 and old in said[0] and new in said[0], (how, said)


def test_a_later_item_wins_whatever_its_spelling(fresh_warnings: None) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RenamedSettingWarning)
        assert load_repair_config(["sampling.temperature=0.2", "temperature=0.5"]).sampling.temperature == 0.5
        assert load_repair_config(["temperature=0.5", "sampling.temperature=0.2"]).sampling.temperature == 0.2
        # a run resumed from its config.resolved.yaml (new spellings) with an old -c item: the item wins
        base = RepairConfig().model_dump(mode="json")
        assert load_repair_config(["max_attempts=7"], base=base).search.max_attempts == 7


def test_both_spellings_in_one_mapping_is_a_one_line_error() -> None:
    with pytest.raises(ConfigError, match=r"temperature and sampling.temperature are both given.*drop temperature"):
        RepairConfig.model_validate({"temperature": 0.5, "sampling": {"temperature": 0.2}})


def test_a_typo_names_the_nearest_setting_by_its_path() -> None:
    with pytest.raises(ConfigError, match=r"temprature: no such setting; did you mean 'sampling.temperature'\?"):
        load_repair_config(["temprature=0.5"])
    with pytest.raises(ConfigError, match=r"sampling.temprature: .*did you mean 'temperature'\?"):
        load_repair_config(["sampling.temprature=0.5"])


@pytest.mark.parametrize(("given", "strategy", "n"), [
    ("best-of-n", "best_of_n", 4), ("Best_Of_N", "best_of_n", 4), ("single", "best_of_n", 1)])
def test_strategies_are_the_searchs_names_earlier_ones_warned(given: str, strategy: str, n: int,
                                                             fresh_warnings: None) -> None:
    with pytest.warns(RenamedSettingWarning, match=r"search.strategy=best_of_n"):
        cfg = load_repair_config([f"search.strategy={given}"])
    assert (cfg.search.strategy, cfg.search.n) == (strategy, n)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RenamedSettingWarning)
        assert load_repair_config(["search.strategy=mcts", "search.c=0.5"]).search.c == 0.5


def test_the_cli_takes_a_flat_name_with_one_warning_and_the_dotted_path_without(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], fresh_warnings: None) -> None:
    """`-c temperature=0.5` on the command line: the run reads it (the command goes on to select its tasks)
    and says once where the setting lives now; `-c sampling.temperature=0.2` says nothing."""
    from agentflow.cli.main import run

    none = ["--filter", "no-such-task", "-o", str(tmp_path / "out"), "--sandbox", "local"]
    assert run(["bench", str(TASKS), "-c", "temperature=0.5", "-c", "temperature=0.5", *none]) == 2
    err = capsys.readouterr().err
    assert err.count("temperature is spelt sampling.temperature now") == 1
    assert "no task is selected" in err  # the config was read; the (empty) selection is what stops it
    assert run(["bench", str(TASKS), "-c", "sampling.temperature=0.2", "--strategy", "best_of_n", *none]) == 2
    err = capsys.readouterr().err
    assert "spelt" not in err and "no task is selected" in err
