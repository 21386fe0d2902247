"""The coder's ranking of the suspects: its numbers pick functions of the heuristic's pool, and its picks
follow the heuristic's best-scored suspects (`rank_keep`; the heuristic's order fills the rest)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agentflow.models.replay import ReplayModel
from agentflow.repair.edit.steps import edit_prompt, rank_suspects
from agentflow.repair.locate.localize import rank_windows
from agentflow.repair.nodes import RankSettings
from agentflow.repair.nodetypes.rollout import SweEditSettings

from .conftest import scripted_cassette

SOURCES = {
    "pkg/config.py": (
        "from pkg.values import to_bool\n\n\n"
        "def getbool(section, option):\n    return to_bool(lookup(section, option))\n\n\n"
        "def lookup(section, option):\n    return section[option]\n"
    ),
    "pkg/values.py": (
        "def to_bool(text):\n    return text.lower() in ('1', 'yes', 'true')\n\n\n"
        "def to_int(text):\n    return int(text)\n"
    ),
}
ISSUE = "`getbool` returns False for 'on'. The `lookup` of the option works."


def scripted(tmp_path: Path, answer: str) -> ReplayModel:
    return ReplayModel(scripted_cassette(tmp_path / "rank.json", [answer]))


def rank(tmp_path: Path, answer: str, *overrides: str) -> tuple[list[tuple[str, str]], list[str]]:
    cfg = RankSettings.model_validate(dict(o.split("=") for o in overrides))
    pool = [w.symbol for w in rank_windows(SOURCES, ISSUE, max_lines=cfg.window_lines, limit=cfg.rank_pool)]
    return asyncio.run(rank_suspects(scripted(tmp_path, answer), cfg, ISSUE, SOURCES, seed=0)), pool


def test_the_numbers_of_the_answer_pick_functions_of_the_pool_in_order(tmp_path: Path):
    picked, pool = rank(tmp_path, "3, 1")
    assert pool == ["lookup", "getbool", "to_bool"]  # to_bool: through the call in getbool
    assert picked == [("pkg/values.py", "to_bool"), ("pkg/config.py", "lookup")]


def test_numbers_outside_the_list_repeats_and_prose_are_ignored(tmp_path: Path):
    picked, pool = rank(tmp_path, "Function 2 (or 2), maybe 99 or 0")
    assert picked == [("pkg/config.py", pool[1])]
    assert rank(tmp_path, "I cannot tell.")[0] == []
    assert len(rank(tmp_path, "1, 2, 3, 4", "windows=2")[0]) == 2  # no more picks than suspects


def test_picks_follow_the_best_scored_suspects_and_the_heuristic_fills_the_rest():
    plain = [w.symbol for w in rank_windows(SOURCES, ISSUE, limit=3)]
    picks = [("pkg/values.py", "to_bool")]
    preferred = [w.symbol for w in rank_windows(SOURCES, ISSUE, limit=3, prefer=picks, keep=1)]
    assert plain == ["lookup", "getbool", "to_bool"] and preferred == ["lookup", "to_bool", "getbool"]
    # the heuristic's best two keep their places (`rank_keep`, default 2), the picks follow them
    assert [w.symbol for w in rank_windows(SOURCES, ISSUE, limit=3, prefer=picks, keep=2)] == plain
    assert rank_windows(SOURCES, ISSUE, limit=3, prefer=picks)[0].symbol == "to_bool"  # keep=0: the picks first
    for keep, second in ((1, "to_bool"), (2, "getbool")):
        settings = SweEditSettings(edit_format="rewrite", rank_keep=keep)
        prompt = edit_prompt(settings, SOURCES, ISSUE, "", focus=1, prefer=picks)
        assert prompt.window is not None and prompt.window.symbol == second  # the second suspect's turn


def test_the_most_suspect_function_keeps_a_place_the_ranking_would_take():
    from agentflow.repair.locate.localize import RunEvidence

    # the runs implicate to_int alone; words put it last, and the ranking names two others
    evidence = RunEvidence(suspicion={("pkg/values.py", "to_int"): 0.9, ("pkg/config.py", "lookup"): 0.4})
    picks = [("pkg/values.py", "to_bool"), ("pkg/config.py", "getbool")]
    ranked = [w.symbol for w in rank_windows(SOURCES, ISSUE, limit=3, prefer=picks, keep=1, evidence=evidence)]
    traced = [w.symbol for w in rank_windows(SOURCES, ISSUE, limit=3, prefer=picks, keep=1, evidence=evidence,
                                             keep_traced=True)]
    assert "to_int" not in ranked and ranked[1:] == ["to_bool", "getbool"]
    assert traced[1] == "to_int" and traced[2] == "to_bool"  # after the kept one, before the picks
    # already kept, or no suspiciousness: the same windows as without it
    assert rank_windows(SOURCES, ISSUE, limit=3, prefer=picks, keep=1, keep_traced=True) == rank_windows(
        SOURCES, ISSUE, limit=3, prefer=picks, keep=1)
    settings = SweEditSettings(edit_format="rewrite", rank_keep=1, rank_keep_traced=True)
    prompt = edit_prompt(settings, SOURCES, ISSUE, "", focus=1, prefer=picks, evidence=evidence)
    assert prompt.window is not None and prompt.window.symbol == "to_int"


def test_a_repository_with_one_candidate_asks_nothing(tmp_path: Path):
    cfg = RankSettings()
    model = scripted(tmp_path, "1")
    sources = {"pkg/a.py": "def parse(text):\n    return text\n"}
    assert asyncio.run(rank_suspects(model, cfg, "`parse` fails", sources, seed=0)) == []
    assert model.remaining == 1
