"""`RepairConfig`: every setting of a repair, with its default in one place (this model); prompts are Jinja
templates under `agentflow/repair/prompts/` unless a config gives its own text."""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator
from pydantic.fields import FieldInfo

from agentflow.config import (
    StrictConfig,
    apply_overrides,
    deep_merge,
    load_yaml,
    strategy_spelling,
    validate_config,
)
from agentflow.errors import ConfigError, did_you_mean
from agentflow.graph.search.settings import STRATEGIES, Strategy
from agentflow.models.base import ChatModel
from agentflow.observe.config import TraceConfig
from agentflow.sandbox.config import SandboxConfig
from agentflow.secrets import redact

REPAIR_SANDBOX_LIFETIME_S = 4 * 3600.0
"""Wall-clock life of a task's sandbox unless the task's `limits.wall_time_s` or `sandbox.sandbox_timeout_s` says otherwise."""
GRADE_MARGIN_S = 600.0
"""Life a task's sandbox keeps past the task's `limits.wall_time_s`: the chosen patch is still verified in it."""

EditFormat = Literal["auto", "rewrite", "search_replace", "tools"]
ModelLoader = Callable[[str], ChatModel]

class RepairPrompts(StrictConfig):
    """Prompt templates (Jinja). None uses the shipped file `agentflow/repair/prompts/<name>.j2`; a string is
    a template of its own. Each names the variables it gets."""

    system: str | None = None
    """System message of the coder."""
    edit: str | None = None
    """User message of an edit attempt (`edit_format: search_replace`): issue, repo_map, code, feedback, plan,
    hint, path (file of the first window), above_code (`failure_above_code`)."""
    tools: str | None = None
    """User message of an attempt with `edit_format: tools`: the same variables as `edit`."""
    rewrite: str | None = None
    """User message of an attempt with `edit_format: rewrite`: issue, code (other windows), snippet (the
    window to rewrite, no line numbers), symbol, path, lines, file (the rest of its file, see
    `file_context_lines`), feedback, plan, hint, repo_map, above_code (`failure_above_code`)."""
    helper_system: str | None = None
    """System message of the planner, critic, ranking and reproduction steps."""
    plan: str | None = None
    """Planner's user message: issue, repo_map, code."""
    critique: str | None = None
    """Critic's user message: issue, patch, tests."""
    rank: str | None = None
    """Suspect ranking's user message: issue, functions (numbered), count, feedback; the numbers in the answer,
    in order, are its ranking."""
    reproduce: str | None = None
    """Reproduction step's user message: issue, repo_map, api, code, previous; the answer's first code block is
    run."""
    expect: str | None = None
    """What the issue's examples should give (the reproduction from examples, `reproduce_from_examples`): issue,
    examples (each as doctest lines with what it gives on the unchanged code); the answer's first code block
    (else its text) is read as a doctest of the fixed code (`agentflow.repair.verify.expectations`)."""
    keep_check: str | None = None
    """Keep-working check's user message: issue, api, usage, code, reproduction (the kept reproduction script);
    the answer's first code block is run."""
    value: str | None = None
    """Value agent's user message (`swe.value`): issue, patch, tests; the answer gives a value 0-100 and an
    assessment."""
    argue: str | None = None
    """A discriminator agent's user message (`swe.discriminate`): issue, finalists, arguments (the earlier
    agents'); the answer argues for one finalist and ends with `Best: N`."""
    judge: str | None = None
    """The discriminator's judge (`swe.discriminate`): issue, finalists, arguments; the answer ends with
    `Choice: N`."""
    localize_files: str | None = None
    """Model localization, files step (`swe.localize`): issue, skeleton, count; the answer lists file paths."""
    localize_symbols: str | None = None
    """Model localization, classes/functions step: issue, skeletons (of the chosen files), count; the answer
    lists `path: name` lines."""
    localize_lines: str | None = None
    """Model localization, edit locations step: issue, code (the chosen functions, numbered lines), count; the
    answer lists `path: name` or `path: line N` lines."""
    regression: str | None = None
    """Regression test selection (`swe.regression`): issue, tests (numbered ids); the answer lists the numbers
    of tests the fix may rightly change (they are not run)."""
    trajectory: str | None = None
    """First turn of a codemonkeys trajectory (`swe.trajectories`) with `edit_format: search_replace`: issue,
    code, api, path; the answer holds a test script and SEARCH/REPLACE edits."""
    trajectory_rewrite: str | None = None
    """First turn of a trajectory with `edit_format: rewrite`: issue, api, code (other windows), snippet, symbol,
    path, lines, opening, file (as `rewrite`); the answer holds a test script and the window rewritten."""
    trajectory_turn: str | None = None
    """A later turn of a trajectory: base_output, patched_output (the script run before and after the edit), diff,
    edit_status, revise (how to give a further edit in the trajectory's edit form)."""
    select: str | None = None
    """The selection trajectory's first message (`swe.vote_tests`): issue, finalists (patches with their
    votes); the answer runs a script on a finalist (`RUN N` and a code block) or picks one (`CHOICE: N`)."""


class RunInputs(StrictConfig):
    """What a run works on (recorded in config.resolved.yaml so the run can be repeated from it alone)."""

    repo: str | None = None
    """Repository directory (`agentflow repair`)."""
    issue: str | None = None
    """Issue text (`agentflow repair`)."""
    tasks: str | None = None
    """Tasks file (`agentflow bench`, or `agentflow repair --tasks`)."""
    allow_paths: list[str] = Field(default_factory=list)
    """Folders the tasks file may name besides its own (`--allow-path`): its local `repo`/`wheelhouse` paths
    must lie under one of them or beside the file."""
    wheelhouse: str | None = None
    """Directory of wheels installed offline for every test run of the task, the repair's own and grading's
    (`agentflow repair REPO --wheelhouse DIR`: the repository's test-only dependencies; with a tasks file it
    replaces the task's own `wheelhouse`). Without the task's `requirements`, every wheel in it is installed."""
    instance_ids: list[str] = Field(default_factory=list)
    """Only these instances (empty: all)."""
    slice: str | None = None
    """Python-style `start:stop` slice of the tasks."""
    filter: str | None = None
    """Regular expression the instance ids must match."""



class ModelRoles(StrictConfig):
    """The models of the helper roles beside the coder (`model`); each one set turns its step on."""
    planner: str | None = None
    """Model of the planner step (setting it turns the step on; `plan: true` uses the coder's model)."""
    critic: str | None = None
    """Model of the critic step (setting it turns the step on; `critique: true` uses the coder's model)."""
    verifier: str | None = None
    """Model that judges the best candidates when tests cannot tell them apart (setting it turns it on)."""


class RepairSearchSettings(StrictConfig):
    """How the workflow's graph search nodes search (the search's own vocabulary: `agentflow.graph.search.settings`)."""
    strategy: Strategy | None = None
    """Sets the workflow's graph search nodes (`--strategy`): best_of_n (n chains of attempts at once; `-n 1`
    is one chain), mcts (tree search over attempts: n * max_attempts expansions of one attempt each, UCT weight
    `c`), beam / tot / rebase (the search's stepwise strategies, n branches). None: the search nodes as the
    workflow defines them (or `when_tests_fail`). `single` and `best-of-n` are earlier spellings (warned)."""
    when_tests_fail: Strategy | None = "mcts"
    """The search when `strategy` is not given and the pre-flight finds tests that fail at the base commit: each
    candidate's tests then say how far it got, so a tree search can build on the best candidates so far (their
    failing tests as feedback) and spread the budget over several of them, where one chain follows a single
    line of attempts and independent samples all start from the unchanged code. Applied to the workflow's
    graph search nodes as `--strategy` would be (a node's own `-c nodes.<node>.strategy` keeps it); None: the
    workflow's search whatever the tests do."""
    n: int = Field(default=4, ge=1, le=64)
    """Chains for best_of_n. mcts makes n * max_attempts expansions of one edit sample each, the same budget as
    best_of_n."""
    max_attempts: int = Field(default=3, ge=1, le=20)
    """Edit attempts in one chain (each after the previous one's test feedback); for mcts, the most attempts
    along one path of the tree."""
    c: float = Field(default=0.3, ge=0)
    """mcts: the UCT exploration weight (values are in [0, 1]); the search's `c`."""
    concurrency: int = Field(default=4, ge=1, le=64)
    """Model calls in flight at once (chains of best_of_n, leaves of mcts); a local server decodes them together."""
    stop_on_success: bool = True
    """Stop drawing samples once a candidate passes tests that decide (task tests, or a failing test command)."""

    @model_validator(mode="before")
    @classmethod
    def _search_spelling(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for key in ("strategy", "when_tests_fail"):
            value = out.get(key)
            if not isinstance(value, str) or value in STRATEGIES:
                continue
            spelt = strategy_spelling(value)
            if spelt == "single":
                warn_renamed(f"search.{key}={value}", f"search.{key}=best_of_n with search.n=1 (`--strategy best_of_n -n 1`)")
                out[key] = "best_of_n"
                if key == "strategy":
                    out["n"] = 1
            elif spelt in STRATEGIES:
                warn_renamed(f"search.{key}={value}", f"search.{key}={spelt}")
                out[key] = spelt
        return out


class Sampling(StrictConfig):
    """How each answer is sampled."""
    temperature: float = Field(default=0.7, ge=0)
    """Sampling temperature."""
    seed: int = 0
    """Base seed; each sample uses seed + its number, so runs are repeatable where the backend honours seeds."""
    max_tokens: int = Field(default=512, ge=16)
    """Output cap of one answer (small models can loop until the cap); a rewrite's cap is raised to fit the
    window it must give back whole."""
    batch_samples: int = Field(default=8, ge=1, le=64)
    """Samples of one prompt in flight at once are sent as one request with `n`, up to this many (the
    server evaluates the prompt once for all of them). At most the server's slots
    (llama-server `--parallel`); 1 sends every sample on its own."""


class EditSettings(StrictConfig):
    """The form of the edits asked for (the edit nodes' own settings, `tool_steps`, `noop_retries`, `split_edits`,
    ..., are their types': `agentflow.repair.nodetypes.rollout.SweEditSettings`)."""
    format: EditFormat = "auto"
    """rewrite: the model rewrites one code window (a short function, or the lines around the suspect), the
    form small models get right most often; search_replace: SEARCH/REPLACE blocks anywhere in the shown code;
    tools: the model edits the files with the editor tools (view, str_replace, insert) through its API's
    tool calling; auto: tools for models that say they call tools (OpenAI, Anthropic, LiteLLM, a serving
    profile with tool calling), else rewrite."""


class TestSettings(StrictConfig):
    """How candidates are verified during the search."""
    feedback: Literal["auto", "task", "repo", "none"] = "repo"
    """Tests that verify candidates during the search. repo (blind, the default): `tests.cmd` on the repository
    as it is, plus a reproduction script (`reproduce`). task: the task's FAIL_TO_PASS/PASS_TO_PASS with its
    test_patch -- hidden tests a real solver does not see (an oracle setting; never for reported resolve rates).
    none: no verification. auto: task when the task has FAIL_TO_PASS tests, else repo. Whatever the mode, the
    submitted patch is evaluated with the task's tests for the report."""
    cmd: str | None = None
    """Test command for repo feedback (default: pytest on the whole repository)."""
    timeout_s: float = Field(default=300.0, gt=0)
    """Limit of one test run (the base commit's; a candidate's is at most this, see `timeout_ratio`)."""
    timeout_ratio: float = Field(default=5.0, ge=1.0)
    """A candidate's test run times out at this multiple of the unchanged code's run of the same tests (at
    least `timeout_floor_s`): a candidate that hangs costs a few base runs, not `timeout_s`."""
    timeout_floor_s: float = Field(default=5.0, gt=0)
    """The shortest timeout of a candidate's test run (a suite of a second still needs time to start)."""
    time_share: float = Field(default=0.3, gt=0, le=1)
    """Share of the task's expected wall time that the repair's own test runs may spend together: the pre-flight
    (at most a third of the share), the call-traced localization run (`swe.spectrum`), the candidates'
    verifications and a finalist's whole-suite check (`repair.verify.testshare`). The expected wall time is
    re-planned at every step: the seconds so far plus the model calls left (`limits.step_limit`) times the
    seconds per call (`model_call_s`), at most `limits.wall_time_s`; without a model-call limit it is the wall
    limit, and with neither there is no share. A run expected not to fit what is left (without a share: its own
    timeout) runs a shortened selection (the tests failing at the base commit first) instead of timing out; both
    are `repair.test_time` events and progress lines."""
    model_call_s: float = Field(default=30.0, gt=0)
    """Seconds one model call is expected to take before the task has made one (the traced localization run
    comes before every model call) and no earlier task of the run has (then their calls' mean is taken); after
    its first call, its own calls' mean. What the expected wall time behind `time_share` is planned with."""
    targeted: bool = True
    """Blind mode: a candidate runs only the repository tests that reached the functions it changes in the base
    commit's traced run (`swe.spectrum`), its whole-suite result estimated from theirs; the whole suite runs
    for a finalist before it is submitted (see `agentflow.repair.verify.targeting`). Off: every candidate runs the
    whole suite."""


class Limits(StrictConfig):
    """What one task (or the whole run) may spend."""
    budget_usd: float | None = Field(default=None, ge=0)
    """Spend limit per task (models with known prices)."""
    run_budget_usd: float | None = Field(default=None, ge=0)
    """Spend limit of the whole run, across all tasks and (with `--executor ray`) all nodes: once reached, running
    tasks stop at their next model call and no further task starts (`--resume` counts what was spent)."""
    step_limit: int | None = Field(default=None, ge=1)
    """Model calls per task (every role's calls count)."""
    wall_time_s: float | None = Field(default=None, gt=0)
    """Wall-clock limit per task."""


class RepairConfig(StrictConfig):
    """Settings of `agentflow repair` / `agentflow bench`, in sections; where each setting comes from:
    docs/concepts/repair.md#settings. Flat names of earlier versions (`temperature`) are read as their new
    paths (`sampling.temperature`) with a warning (`RENAMED`)."""

    model: str = "local:qwen2.5-coder-1.5b"
    """Model spec of the coder; `{instance_id}` in any role's spec is replaced per task (e.g. one cassette each)."""
    model_options: dict[str, Any] = Field(default_factory=dict)
    """Options of every role's model (`agentflow.models.ModelOptions`: timeout_s, max_attempts, concurrency,
    ...), e.g. `-c model_options.timeout_s=900` for a busy CPU server."""
    roles: ModelRoles = Field(default_factory=ModelRoles)
    """Planner, critic and verifier models."""
    workflow: str = "repair"
    """The repair workflow: a shipped name (`repair`) or a YAML path (see `agentflow graph show repair`)."""
    nodes: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Settings of single nodes, over the workflow's own: `-c nodes.search.n=8` (node name, then setting).
    `*` holds the settings of every node whose type takes them, under the workflow's own: `-c finalists=4`
    (a setting of node types, not of the run) is `nodes.*.finalists` (`node_setting_names`)."""
    search: RepairSearchSettings = Field(default_factory=RepairSearchSettings)
    """The search over attempts."""
    sampling: Sampling = Field(default_factory=Sampling)
    """Sampling of answers."""
    edit: EditSettings = Field(default_factory=EditSettings)
    """The form of the edits asked for."""
    tests: TestSettings = Field(default_factory=TestSettings)
    """Verification of candidates."""
    limits: Limits = Field(default_factory=Limits)
    """Spend limits of a task and of the run."""
    backend: Literal["auto", "docker", "local"] = "auto"
    """Sandbox backend (auto: docker when the engine answers)."""
    sandbox: SandboxConfig = Field(
        default_factory=lambda: SandboxConfig.model_validate({"sandbox_timeout_s": REPAIR_SANDBOX_LIFETIME_S}))
    """Settings of each task's sandbox. Its wall-clock life (`sandbox.sandbox_timeout_s`, 4 hours here: a
    search of many samples on a real package can outlast the sandbox's own 1-hour default on a busy CPU)
    stretches to the task's `limits.wall_time_s` plus time to grade when that is longer (`task_sandbox_config`)."""
    trace: TraceConfig = Field(default_factory=TraceConfig)
    """OpenTelemetry spans of the run (`trace.endpoint`, `trace.content`); nothing is sent unless configured."""
    prompts: RepairPrompts = Field(default_factory=RepairPrompts)
    """Prompt templates."""
    workers: int = Field(default=1, ge=1, le=64)
    """Tasks repaired at the same time (one sandbox each)."""
    inputs: RunInputs = Field(default_factory=RunInputs)
    """What the run works on (set from the command line)."""

    @model_validator(mode="before")
    @classmethod
    def _earlier_names(cls, data: Any) -> Any:
        return renamed_to_paths(data) if isinstance(data, dict) else data


RENAMED: dict[str, str] = {
    "planner_model": "roles.planner",
    "critic_model": "roles.critic",
    "verifier_model": "roles.verifier",
    "strategy": "search.strategy",
    "strategy_when_tests_fail": "search.when_tests_fail",
    "n": "search.n",
    "max_attempts": "search.max_attempts",
    "mcts_c": "search.c",
    "concurrency": "search.concurrency",
    "stop_on_success": "search.stop_on_success",
    "temperature": "sampling.temperature",
    "seed": "sampling.seed",
    "max_tokens": "sampling.max_tokens",
    "batch_samples": "sampling.batch_samples",
    "edit_format": "edit.format",
    "feedback": "tests.feedback",
    "test_cmd": "tests.cmd",
    "test_timeout_s": "tests.timeout_s",
    "test_timeout_ratio": "tests.timeout_ratio",
    "test_timeout_floor_s": "tests.timeout_floor_s",
    "test_time_share": "tests.time_share",
    "target_tests": "tests.targeted",
    "budget_usd": "limits.budget_usd",
    "run_budget_usd": "limits.run_budget_usd",
    "step_limit": "limits.step_limit",
    "wall_time_s": "limits.wall_time_s",
}
"""Flat name of an earlier version -> its path in `RepairConfig` now. Each is still read (from Python, a config
file or `-c`), with a warning naming the new path once per process; node types name a setting of the run they
take by its flat name (`run_field`)."""

_warned: set[str] = set()


class RenamedSettingWarning(UserWarning):
    """A setting was given in an earlier spelling; the message names the one to use."""


def warn_renamed(old: str, new: str) -> None:
    """Warn, once per spelling and process, that `old` is now `new`."""
    if old in _warned:
        return
    _warned.add(old)
    warnings.warn(f"repair config: {old} is spelt {new} now", RenamedSettingWarning, stacklevel=2)


def renamed_to_paths(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with its flat names of earlier versions (`RENAMED`) moved to their paths, one warning each; a
    ConfigError when one mapping gives a setting in both spellings."""
    old = [key for key in data if key in RENAMED]
    if not old:
        return data
    out = {key: value for key, value in data.items() if key not in RENAMED}
    for key in old:
        section, name = RENAMED[key].split(".")
        given = out.get(section)
        if isinstance(given, dict) and name in given:
            raise ConfigError(f"repair config: {key} and {RENAMED[key]} are both given", hint=f"drop {key}")
        warn_renamed(key, RENAMED[key])
        out[section] = {**(given if isinstance(given, dict) else {}), name: data[key]}
    return out


def run_field(name: str) -> FieldInfo:
    """The field of the run's setting a node type names `name` (its flat name, `RENAMED`): its default, bounds
    and description, from their one source."""
    path = RENAMED.get(name, name)
    if "." not in path:
        return RepairConfig.model_fields[path]
    section, leaf = path.split(".")
    section_cls = RepairConfig.model_fields[section].annotation
    assert isinstance(section_cls, type) and issubclass(section_cls, StrictConfig), section
    return section_cls.model_fields[leaf]


def with_setting(cfg: RepairConfig, path: str, value: Any) -> RepairConfig:
    """A copy of `cfg` with the setting at `path` (`tests.feedback`; a flat name of `RENAMED` is read as its
    path) set to `value`, not validated (as `model_copy(update=...)`)."""
    section, _, leaf = RENAMED.get(path, path).partition(".")
    if not leaf:
        return cfg.model_copy(update={section: value})
    return cfg.model_copy(update={section: getattr(cfg, section).model_copy(update={leaf: value})})


def run_setting_names() -> frozenset[str]:
    """The flat names node types may take a run's setting by: the run's top-level settings and `RENAMED`'s keys."""
    return frozenset(RepairConfig.model_fields) | frozenset(RENAMED)


def run_values_for(cfg: RepairConfig, names: Iterable[str]) -> dict[str, Any]:
    """The run's values of those of `names` that are settings of the run, by the names node types use
    (`run_field`): what a node's settings start from."""
    known = run_setting_names()
    return {name: run_value(cfg, name) for name in names if name in known}


def run_value(cfg: RepairConfig, name: str) -> Any:
    """The run's value of the setting a node type names `name` (`run_field`)."""
    value: Any = cfg
    for part in RENAMED.get(name, name).split("."):
        value = getattr(value, part)
    return value


ALL_NODES = "*"
"""The `nodes:` entry of the settings every node whose type takes them gets (`-c finalists=4`)."""


def node_setting_names() -> frozenset[str]:
    """The settings of the repair's node types that are not the run's (each type's class is their one source)."""
    from agentflow.graph.compile.nodetypes import default_registry  # the types register through entry points

    return frozenset(name for node_type in default_registry().types.values()
                     if node_type.needs == "repair" and node_type.settings is not None
                     for name in node_type.settings.model_fields) - run_setting_names()


def _to_all_nodes(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with its node types' settings (`node_setting_names`) moved under `nodes.*`; a ConfigError for a
    name under `nodes.*` that no node type takes."""
    known = node_setting_names()
    names = known & set(data)
    nodes = {**dict(data.get("nodes") or {})}
    every = {**dict(nodes.get(ALL_NODES) or {}), **{name: data[name] for name in sorted(names)}}
    unknown = sorted(set(every) - known - run_setting_names())
    if unknown:
        raise ConfigError(f"repair config: nodes.{ALL_NODES}.{unknown[0]}: no node type takes that setting"
                          f"{did_you_mean(unknown[0], known)}")
    if not every:
        return data
    nodes[ALL_NODES] = every
    return {**{k: v for k, v in data.items() if k not in names}, "nodes": nodes}


def _renamed_item(item: str) -> str:
    """A `-c key=value` item with a flat name of an earlier version (`RENAMED`) in front spelt as its path."""
    key, value = item.split("=", 1)
    head, dot, rest = key.strip().partition(".")
    if head not in RENAMED:
        return item
    warn_renamed(head, RENAMED[head])
    return f"{RENAMED[head]}{dot}{rest}={value}"


def load_repair_config(
    overrides: list[str] | tuple[str, ...] = (), base: dict[str, Any] | None = None
) -> RepairConfig:
    """The defaults (this module and the node types' settings classes: their only sources), then `base`, then
    `-c` items (files or key=value); a node type's setting given as the run's goes to `nodes.*`."""
    data = renamed_to_paths(dict(base or {}))
    for item in overrides:  # each item's flat names moved first, so a later item wins whatever its spelling
        data = apply_overrides(data, [_renamed_item(item)]) if "=" in item else \
            deep_merge(data, renamed_to_paths(apply_overrides({}, [item])))
    data = _to_all_nodes(data)
    _check_top_level(data)
    return validate_config(RepairConfig, data, source="repair config")


def _check_top_level(data: dict[str, Any]) -> None:
    """A ConfigError for a top-level name the run does not have, naming the nearest setting by its path (a
    typo of `temperature` suggests `sampling.temperature`)."""
    unknown = sorted(set(data) - set(RepairConfig.model_fields))
    if not unknown:
        return
    paths = {**{name: name for name in RepairConfig.model_fields}, **{path.split(".")[1]: path for path in RENAMED.values()},
             **{path: path for path in RENAMED.values()}}
    near = did_you_mean(unknown[0], paths, sep="")
    name = near.removeprefix("did you mean '").removesuffix("'?")
    hint = f"; did you mean '{paths[name]}'?" if near else ""
    raise ConfigError(f"repair config: {unknown[0]}: no such setting{hint}")


def resumed_repair_config(run_dir: Path, overrides: list[str] | tuple[str, ...] = ()) -> RepairConfig:
    """The settings of the run in `run_dir` (its config.resolved.yaml), then `-c` items: what a resumed run
    goes on with. A secret that was saved redacted there must be given again (a UserError naming it)."""

    from agentflow.errors import UserError
    from agentflow.runfiles import read_text
    from agentflow.runrecord import verified_yaml
    from agentflow.secrets import masked_paths

    resolved = run_dir / "config.resolved.yaml"
    text = read_text(resolved)  # never through a link the folder brings
    if text is None:
        raise UserError(f"{run_dir} is not a run directory (no config.resolved.yaml)", hint="check -o")
    body = verified_yaml(text)
    if body is None and not overrides:  # a folder from elsewhere: its model, sandbox and settings are not used
        raise UserError(f"{resolved} is not a record of a run of yours (no valid signature from this machine's "
                        "run key): the model, sandbox and settings it names are not used",
                        hint="give them on the command line (--model, --sandbox, -c KEY=VALUE), which is then "
                        "what runs")
    base = load_yaml(body, str(resolved)) if body is not None else {}  # signed: only a damaged file fails
    cfg = load_repair_config(overrides, base=dict(base or {}))
    hidden = masked_paths(cfg.model_dump(mode="json"))
    if hidden:
        raise UserError(f"{hidden[0]} was saved redacted in {resolved}", hint=f"give it again: -c {hidden[0]}=VALUE")
    return cfg


RESUME_MAY_CHANGE = ("workers", "model_options", "trace", "limits.run_budget_usd", "inputs.slice", "inputs.filter",
                     "inputs.instance_ids", "inputs.allow_paths")
"""Settings a resumed run may be given anew (dotted paths and what is below them): how the run is carried out
(tasks at a time, the model calls' timeouts and retries, tracing, the whole run's spend limit) and which of the
tasks file's tasks it takes. Every other setting shaped the results of the tasks the run finished, so a resume
that changes one is refused (`changed_on_resume`): the run's report would mix tasks repaired two ways under one
recorded config."""
_LOOPBACK_PORT = re.compile(r"(://(?:127\.0\.0\.1|localhost|\[::1\])):\d+")


def changed_on_resume(recorded: dict[str, Any], cfg: RepairConfig) -> list[str]:
    """The settings of `cfg` that differ from a run's `recorded` ones (its config.resolved.yaml, read back), as
    `path: now NEW (the run's: OLD)`, outside `RESUME_MAY_CHANGE`. Compared as written (secrets masked on both
    sides); a tasks file named by another path to the same file is the same file."""
    now = _leaves(as_written(cfg))
    was = _leaves(recorded)
    changed = []
    for path in sorted(set(now) | set(was)):
        if any(path == keep or path.startswith(keep + ".") for keep in RESUME_MAY_CHANGE):
            continue
        new, old = now.get(path), was.get(path)
        if path == "model" or path.startswith("roles."):
            # a server this machine starts for a run (`--serve`) listens on another port each time
            new, old = (_LOOPBACK_PORT.sub(r"\1", v) if isinstance(v, str) else v for v in (new, old))
        if new == old or (path == "inputs.tasks" and _same_file(new, old)):
            continue
        changed.append(f"{path}: now {new!r} (the run's: {old!r})")
    return changed


def as_written(cfg: RepairConfig) -> dict[str, Any]:
    """The settings as config.resolved.yaml holds them (`dump_yaml`'s data: JSON values, secrets masked)."""
    data: dict[str, Any] = redact(cfg.model_dump(mode="json"))
    return data


def _leaves(data: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as `{dotted path: value}` (lists are values; an empty mapping holds nothing, as an
    absent one)."""
    if not isinstance(data, dict):
        return {prefix: data} if prefix else {}
    return {path: value for key, item in data.items()
            for path, value in _leaves(item, f"{prefix}.{key}" if prefix else str(key)).items()}


def _same_file(a: Any, b: Any) -> bool:
    try:
        return isinstance(a, str) and isinstance(b, str) and Path(a).samefile(b)
    except OSError:
        return False


def task_sandbox_config(cfg: RepairConfig) -> SandboxConfig:
    """The sandbox settings of one task: `cfg.sandbox`, living at least the task's `limits.wall_time_s` plus
    `GRADE_MARGIN_S` (a sandbox that dies first turns a slow task into an `env_error`)."""
    wall_time_s = cfg.limits.wall_time_s
    if wall_time_s is None or cfg.sandbox.sandbox_timeout_s >= wall_time_s + GRADE_MARGIN_S:
        return cfg.sandbox
    return cfg.sandbox.model_copy(update={"sandbox_timeout_s": wall_time_s + GRADE_MARGIN_S})
