"""The search node types `search.best_of_n` and `search.mcts`: `agentflow.search`'s engines drive the repair's
rollouts (best-of-N chains or an MCTS tree of attempts) through `RepairPolicy`, reading the node's subgraph as
the description of a rollout. The graph `search:` node (`agentflow.graph.search`, `rollout.py`) runs the same
steps as real graph nodes instead."""

from __future__ import annotations

import math
from typing import Any, Literal

from agentflow.budget import Budget, BudgetExceeded
from agentflow.errors import ModelError, UserError
from agentflow.events import EventLog
from agentflow.graph.spec import is_end
from agentflow.repair.config import RepairConfig
from agentflow.repair.nodekit import emit, runtime
from agentflow.repair.policy import RepairPolicy, ValuedRepairPolicy
from agentflow.repair.runtime import RepairRuntime, TaskEvents, settings_model
from agentflow.repair.spectrum import evidence_from_json
from agentflow.repair.workbench import Verification

BestOfNSettings = settings_model("search.best_of_n", ("n", "max_attempts", "concurrency", "stop_on_success", "seed"))
MCTSSettings = settings_model(
    "search.mcts", ("n", "max_attempts", "concurrency", "stop_on_success", "seed", "mcts_k", "mcts_c")
)


async def run_search(policy: RepairPolicy, cfg: RepairConfig, algorithm: Literal["best_of_n", "mcts"],
                     base: Verification, budget: Budget, events: EventLog) -> None:
    """Search from the base state: `best_of_n` runs n chains (`strategy: single` is one), `mcts` a tree of
    about n * max_attempts samples (`mcts_k` per expansion, concurrent under virtual loss)."""
    from agentflow.search import MCTS, BestOfN, FunctionVerifier
    from agentflow.search.types import Verification as SearchVerification

    def value(cand: Any) -> SearchVerification:
        v = cand.state.data.get("verification")
        if not isinstance(v, Verification):
            return SearchVerification()
        # a value agent's value (`swe.value`) guides the search where there is one; the tests decide `passed`
        return SearchVerification(score=float(cand.state.data.get("value", v.score)), passed=v.passed)

    verifier = FunctionVerifier(value, name="tests")
    tree_events = TaskEvents(events, policy.iid)
    root = policy.root(base)
    if algorithm == "mcts":
        expansions = math.ceil(cfg.n * cfg.max_attempts / cfg.mcts_k)
        await MCTS(policy, verifier, k=cfg.mcts_k, concurrency=max(1, cfg.concurrency // cfg.mcts_k), c=cfg.mcts_c,
                   max_depth=cfg.max_attempts, max_expansions=expansions, stop_on_solution=cfg.stop_on_success,
                   seed=cfg.seed, charge_budget=False).run(root, budget=budget, events=tree_events)
        return
    await BestOfN(policy, verifier, n=cfg.n, concurrency=min(cfg.n, cfg.concurrency), seed=cfg.seed,
                  charge_budget=False).run(root, budget=budget, events=tree_events)


ROLLOUT_STEPS = ("swe.test", "swe.critique", "swe.value")
"""Node types a rollout may hold after its `swe.edit`."""


def rollout_steps(subgraph: Any) -> list[tuple[str, str]]:
    """(node name, node type) of a rollout subgraph, in order: a chain from its first node to END, the first a
    proposer (`swe.edit`), a `swe.test` among the rest."""
    edges = dict(subgraph.edges)
    order: list[tuple[str, str]] = []
    name = subgraph.first_node()
    while name is not None and not is_end(name):
        if name in (n for n, _ in order):
            raise UserError(f"rollout subgraph '{subgraph.name}' loops at '{name}'; a rollout is a chain of steps")
        order.append((name, subgraph.nodes[name].type or ""))
        name = edges.get(name)
    types = [t for _, t in order]
    if not types or types[0] != "swe.edit" or "swe.test" not in types[1:]:
        raise UserError(
            f"rollout subgraph '{subgraph.name}' must start with a swe.edit node and contain a swe.test node "
            f"(has {' -> '.join(types) or 'nothing'})"
        )
    unknown = [t for t in types[1:] if t not in ROLLOUT_STEPS]
    if unknown:
        raise UserError(f"rollout subgraph '{subgraph.name}': {unknown[0]} cannot be a rollout step "
                        f"({', '.join(ROLLOUT_STEPS)})")
    return order


def _policy(rt: RepairRuntime, state: Any, ctx: Any) -> RepairPolicy:
    steps = rollout_steps(ctx.spec.subgraph)
    edit_node = steps[0][0]
    critique_node = next((n for n, t in steps if t == "swe.critique"), None)
    critique_cfg = rt.cfg_for(critique_node) if critique_node else None
    if critique_cfg is not None and not (critique_cfg.critique or rt.cfg.critic_model):
        critique_cfg = None
    prefer = [tuple(x) for x in state.get("ranked") or []]
    args = (rt.cfg_for(ctx.node), rt.bench, rt.models, rt.budget, rt.events, rt.issue, rt.record)
    kwargs: dict[str, Any] = {"plan": state.get("plan") or "", "prefer": prefer, "edit_cfg": rt.cfg_for(edit_node),
                              "critique_cfg": critique_cfg, "evidence": evidence_from_json(state.get("spectrum"))}
    value_node = next((n for n, t in steps if t == "swe.value"), None)
    if value_node is not None:
        return ValuedRepairPolicy(*args, value_cfg=rt.cfg_for(value_node), **kwargs)
    return RepairPolicy(*args, **kwargs)


async def _run_search(state: Any, ctx: Any, algorithm: Literal["best_of_n", "mcts"]) -> dict[str, Any]:
    rt = runtime(ctx)
    await rt.sync(state)
    base = Verification.model_validate(state["base"])
    policy = rt.policy = _policy(rt, state, ctx)
    # where the samples look (the suspects they share out, best first), for the outcome and the benchmark; the
    # sources read here are the ones the root's first samples use (the policy caches them)
    sources = await policy.sources_at("")
    shown = policy.ranked_windows(policy.root(base), sources)
    found = [f"{w.path}:{w.symbol}" for w in shown]
    emit(rt, "repair.base", passed=base.passed, score=base.score, feedback=rt.bench.mode,
         reproduced=(state.get("reproduction") or {}).get("kept"), edit_format=policy.edit_cfg.edit_format,
         suspects=found)
    stopped, error = None, None
    try:
        await run_search(policy, rt.cfg_for(ctx.node), algorithm, base, rt.budget, rt.events)
    except BudgetExceeded as exc:
        stopped, error = f"limits_exceeded:{exc.kind}", str(exc)
    except ModelError as exc:
        # the candidates found so far are kept; with none, the task is an infrastructure failure
        stopped = "context_exceeded" if "context" in str(exc).lower() else "model_error"
        error = f"{exc.__class__.__name__}: {exc}"
    attempts = [{"candidate_id": a.candidate_id, "patch": a.patch, "sample": a.sample, "part_of": a.part_of,
                 "verification": a.verification.model_dump(mode="json")} for a in policy.attempts]
    for item in attempts:  # the value agent's judgement of each candidate, for the final pick
        judged = getattr(policy, "judged", {}).get(item["candidate_id"])
        if judged is not None:
            item |= {"value": judged.value, "assessment": judged.assessment}
    return {"attempts": attempts, "samples": policy.samples, "suspects": found,
            "search": {"stopped": stopped, "error": error}}


async def best_of_n(state: Any, ctx: Any, settings: Any) -> dict[str, Any]:
    return await _run_search(state, ctx, "best_of_n")


async def mcts(state: Any, ctx: Any, settings: Any) -> dict[str, Any]:
    return await _run_search(state, ctx, "mcts")


__all__ = ["BestOfNSettings", "MCTSSettings", "best_of_n", "mcts", "rollout_steps", "run_search"]
