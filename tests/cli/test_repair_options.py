"""The model/search/limit flags `repair` and `bench` share: one definition, one mapping to overrides."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from typer.main import get_command

from agentflow.cli.main import build_app, run
from agentflow.cli.parts.serve_flag import sets_model
from agentflow.cli.repair.repair_options import repair_overrides
from agentflow.config import apply_overrides
from agentflow.errors import UserError
from agentflow.repair.config import load_repair_config

SHARED = [
    "--strategy",
    "-n",
    "--model",
    "--planner-model",
    "--critic-model",
    "--verifier-model",
    "--serve",
    "--test-cmd",
    "--budget-usd",
    "--step-limit",
    "--wall-time",
    "--sandbox",
]


def _options(command: str) -> dict[str, tuple[str | None, object]]:
    cmd = get_command(build_app()).commands[command]  # type: ignore[attr-defined]
    return {opt: (p.help, p.default) for p in cmd.params for opt in p.opts}


def test_repair_and_bench_declare_the_shared_flags_identically() -> None:
    repair, bench = _options("repair"), _options("bench")
    for flag in SHARED:
        assert flag in repair and flag in bench, flag
        assert repair[flag] == bench[flag], flag
        assert repair[flag][0], f"{flag} has no help text"


def test_every_flag_maps_to_its_config_key() -> None:
    items = repair_overrides(
        strategy="best_of_n",
        n=8,
        model="openai-compatible:http://127.0.0.1:8000/v1#m",
        planner_model="openai:gpt-4o-mini",
        critic_model="anthropic:claude-3-5-haiku-latest",
        verifier_model="local:gemma3-270m",
        test_cmd="pytest -x tests/test_a.py",
        budget_usd=0.5,
        step_limit=12,
        wall_time="1h30m",
        sandbox="local",
    )
    assert apply_overrides({}, items) == {
        "search": {"strategy": "best_of_n", "n": 8},
        "model": "openai-compatible:http://127.0.0.1:8000/v1#m",
        "roles": {"planner": "openai:gpt-4o-mini", "critic": "anthropic:claude-3-5-haiku-latest",
                  "verifier": "local:gemma3-270m"},
        "tests": {"cmd": "pytest -x tests/test_a.py", "feedback": "repo"},
        "limits": {"budget_usd": 0.5, "step_limit": 12, "wall_time_s": 5400.0},
        "backend": "local",
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the flags spell every setting by its path: no renamed-setting warning
        cfg = load_repair_config(items)
    assert (cfg.search.strategy, cfg.search.n, cfg.roles.verifier, cfg.limits.wall_time_s) == (
        "best_of_n", 8, "local:gemma3-270m", 5400.0)
    assert repair_overrides() == []


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"strategy": "greedy"}, "--strategy must be"),
        ({"n": 0}, "-n must be at least 1"),
        ({"budget_usd": -1.0}, "--budget-usd must not be negative"),
        ({"step_limit": 0}, "--step-limit must be at least 1"),
        ({"wall_time": "soon"}, "is not a duration"),
        ({"sandbox": "vm"}, "--sandbox must be"),
        ({"critic_model": " "}, "--critic-model is empty"),
    ],
)
def test_bad_values_are_user_errors(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(UserError, match=needle):
        repair_overrides(**kwargs)  # type: ignore[arg-type]


def test_sets_model_sees_key_value_items_and_config_files(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("model: openai:gpt-4o-mini\nn: 2\n")
    assert sets_model([str(cfg)]) and sets_model(["model=local:gemma3-270m"])
    assert not sets_model(["search.n=2", "roles.planner=openai:gpt-4o"])


@pytest.mark.parametrize("command", ["repair", "bench"])
def test_bad_flag_values_exit_2_in_one_line(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [command, str(tmp_path), "--strategy", "greedy"]
    assert run(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("agentflow: error: --strategy must be")
