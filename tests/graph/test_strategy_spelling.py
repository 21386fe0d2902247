"""A search strategy's name is accepted in either spelling, wherever one is named: a node's `search.strategy`
(YAML or `-c`), a `strategy_key` value in the state, and `--strategy` of `repair`/`bench` (`best-of-n` and
`best_of_n`, any case; a spelling other than the search's warns once); an unknown one is still refused, with the
nearest name."""

from __future__ import annotations

import warnings

import pytest

from agentflow.cli.repair.repair_options import repair_overrides
from agentflow.errors import ConfigError, UserError
from agentflow.graph.run.outcome import NodeFailed
from agentflow.graph.search.settings import STRATEGIES, STRATEGY_NAMES, parse_search_settings, strategy_for
from agentflow.repair.config import RenamedSettingWarning, load_repair_config


def _spellings(name: str) -> list[str]:
    return sorted({name, name.replace("_", "-"), name.replace("-", "_"), name.upper(), name.title(),
                   f" {name.replace('_', '-').capitalize()} "})


GRAPH = [(spelt, name) for name in ("best_of_n", "beam", "tot", "rebase", "mcts") for spelt in _spellings(name)]


@pytest.mark.parametrize("spelt, name", GRAPH)
def test_search_strategy_in_any_spelling(spelt: str, name: str) -> None:
    assert parse_search_settings({"strategy": spelt}, "go").strategy == name


@pytest.mark.parametrize("spelt, name", [(s, STRATEGY_NAMES[n]) for n in STRATEGY_NAMES for s in _spellings(n)])
def test_strategy_key_values_in_any_spelling(spelt: str, name: str) -> None:
    settings = parse_search_settings({"strategy_key": "algorithm"}, "go")
    assert strategy_for(settings, {"algorithm": spelt}, "go").strategy == name


@pytest.mark.parametrize("spelt, name", [(s, n) for n in STRATEGIES for s in _spellings(n)])
def test_repair_strategy_flag_in_any_spelling(spelt: str, name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RenamedSettingWarning)
        assert load_repair_config(repair_overrides(strategy=spelt)).search.strategy == name


def test_unknown_names_are_still_refused() -> None:
    with pytest.raises(ConfigError):
        parse_search_settings({"strategy": "best_of"}, "go")
    with pytest.raises(NodeFailed):
        strategy_for(parse_search_settings({"strategy_key": "a"}, "go"), {"a": "bestofn"}, "go")
    with pytest.raises(UserError, match="did you mean 'best_of_n'"):
        repair_overrides(strategy="best-of_m")
