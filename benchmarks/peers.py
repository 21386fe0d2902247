"""A peer, side by side: mini-swe-agent (pinned from PyPI, its own bash loop) and agentflow's default repair on the
same tasks, against the same served model, at the same model-call limit per task; both systems' patches graded
by agentflow's eval harness (`agentflow.swe.evaluate`, the tasks' hidden tests).

- The model: one llama-server (`--serve`, default the embedded Qwen2.5-Coder-1.5B), started here and used by
  both: agentflow through its OpenAI-compatible backend (as `--serve` does), mini-swe-agent through litellm's
  (`openai/NAME` at the server's `/v1`).
- mini-swe-agent runs in the benchmark's own venv (`--mini-venv`, made on first use with `pip install
  mini-swe-agent==PIN`; never a dependency of agentflow), driven by `benchmarks/_peers_mini.py`: its
  `DefaultAgent`, one of its SWE-bench configs (`--mini-config`, default its text-based one, which a small model
  follows without tool calling) and its `DockerEnvironment` on agentflow's sandbox image, `--network none`,
  set up as agentflow's test runs are (the repository at its base commit, `python`, the root and `src/`
  importable, the task's requirements from its wheelhouse). Its patch is what it submits (as its own SWE-bench
  runner takes it); the tracked files' final diff is its second candidate.
- agentflow: `agentflow bench`'s repair in this process (`agentflow.repair.run.runs.run_batch`), defaults as shipped
  (`--workflows` adds shipped workflows beside `repair`), `step_limit` = `--calls`; its candidates are the
  `candidates.jsonl` patches.
- Figures per system: resolved (the submitted patch resolves), coverage (tasks where any candidate resolves),
  model calls, tokens (prompt + completion), wall seconds (the system's own runs, grading not included).

Prints ONE JSON object. Run (a smoke test: one task):
    .venv/bin/python benchmarks/peers.py --tasks examples/real-tasks/tasks.jsonl --limit 1
Both sets, the same calls per task (hours on a CPU):
    .venv/bin/python benchmarks/peers.py --tasks examples/swe-tasks/tasks.jsonl examples/real-tasks/tasks.jsonl
The same in parts, for machines whose processes cannot outlive a few hours: `--part K/N` runs the K-th of N
interleaved parts of the tasks (each part's JSON object kept, e.g. under docs/measurements/), and
`--merge PART.json ...` sums the parts into the one object of the whole run (same settings, disjoint tasks):
    .venv/bin/python benchmarks/peers.py --part 1/4 --out runs/peers-1   # ... --part 4/4
    .venv/bin/python benchmarks/peers.py --merge runs/peers-*/peers.json
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import random
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from _journal import commit as checkout_commit  # this folder is on sys.path when the script runs

ROOT = Path(__file__).resolve().parents[1]
MINI_PIN = "mini-swe-agent==2.4.6"
MINI_DRIVER = Path(__file__).resolve().parent / "_peers_mini.py"
MINI = "mini-swe-agent"
DEFAULT_TASKS = [str(ROOT / "examples" / "swe-tasks" / "tasks.jsonl"), str(ROOT / "examples" / "real-tasks" / "tasks.jsonl")]


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=DEFAULT_TASKS, help="tasks files (default: both example sets)")
    parser.add_argument("--limit", type=int, default=None, help="a seeded subset of N tasks of each tasks file")
    parser.add_argument("--seed", type=int, default=0, help="seed of the --limit subsets (and of mini's sampling)")
    parser.add_argument("--calls", type=int, default=12, help="model calls per task, for every system")
    parser.add_argument("--systems", default=f"{MINI},agentflow", help="comma-separated: mini-swe-agent, agentflow")
    parser.add_argument("--workflows", default="repair",
                        help="agentflow workflows, each a system (agentflow:NAME), e.g. repair,agentless")
    parser.add_argument("--serve", default="llamacpp:qwen2.5-coder-1.5b", help="the served model (a --serve value)")
    parser.add_argument("--mini-venv", type=Path,
                        default=Path.home() / ".cache" / "agentflow" / "peers" / f"venv-{MINI_PIN.replace('==', '-')}",
                        help="mini-swe-agent's own venv (made on first use)")
    parser.add_argument("--mini-config", default="swebench_backticks.yaml",
                        help="mini-swe-agent's config (a name of its own configs or a path)")
    parser.add_argument("--temperature", type=float, default=None,
                        help="mini-swe-agent's sampling temperature (default: none sent, as its configs ship: the "
                             "server's own sampling)")
    parser.add_argument("--max-tokens", type=int, default=1024, help="mini-swe-agent's tokens per answer")
    parser.add_argument("--task-timeout", type=float, default=3600.0, help="seconds one mini-swe-agent task may take")
    parser.add_argument("--concurrent", action="store_true",
                        help="run the systems at the same time against the one server (their wall times then share "
                             "the machine; default: one after the other)")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / f"peers-{time.strftime('%Y%m%d-%H%M%S')}")
    parser.add_argument("-c", dest="config", action="append", default=[], help="agentflow -c key=value items")
    parser.add_argument("--part", type=_part, default=None, metavar="K/N",
                        help="run the K-th of N interleaved parts of the tasks (1 <= K <= N)")
    parser.add_argument("--merge", nargs="+", type=Path, default=None, metavar="PART.json",
                        help="sum the JSON objects of --part runs into one (nothing is run)")
    args = parser.parse_args(argv)
    for path in args.merge or []:
        if not path.is_file():
            parser.error(f"--merge {path}: no such file")
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit must be at least 1, got {args.limit}")
    if args.calls < 1:
        parser.error(f"--calls must be at least 1, got {args.calls}")
    unknown = [s for s in systems(args) if s != MINI and not s.startswith("agentflow:")]
    if unknown or not systems(args):
        parser.error(f"--systems takes {MINI} and agentflow, got {args.systems!r}")
    for path in args.tasks:
        if not Path(path).is_file():
            parser.error(f"--tasks {path}: no such file")
    return args


def _part(text: str) -> tuple[int, int]:
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected K/N (e.g. 1/4), got {text!r}") from None
    if not 1 <= k <= n:
        raise argparse.ArgumentTypeError(f"K/N needs 1 <= K <= N, got {text!r}")
    return k, n


def systems(args: argparse.Namespace) -> list[str]:
    """The systems to run, in order: mini-swe-agent, then one `agentflow:WORKFLOW` per workflow."""
    out: list[str] = []
    for name in (s.strip() for s in args.systems.split(",") if s.strip()):
        if name == "agentflow":
            out += [f"agentflow:{w.strip()}" for w in args.workflows.split(",") if w.strip()]
        else:
            out.append(name)
    return out


def select_tasks(files: Sequence[str], limit: int | None, seed: int) -> list[tuple[str, Any]]:
    """(tasks file, task) pairs: every task of each file, or a subset of `limit` of each drawn with `seed`
    (spread over the file's repositories, unlike a slice), in the file's order."""
    from agentflow.swe.tasks import load_tasks

    chosen: list[tuple[str, Any]] = []
    for path in files:
        tasks = load_tasks(path)
        ids = [t.instance_id for t in tasks]
        keep = set(random.Random(seed).sample(ids, limit)) if limit is not None and limit < len(ids) else set(ids)
        chosen += [(path, t) for t in tasks if t.instance_id in keep]
    return chosen


def part_of(chosen: list[tuple[str, Any]], part: tuple[int, int] | None) -> list[tuple[str, Any]]:
    """The K-th of N interleaved parts of the chosen tasks (every N-th task from the K-th: each part spread over
    the files and their repositories); all of them without `part`."""
    if part is None:
        return chosen
    k, n = part
    return chosen[k - 1::n]


# ---------------------------------------------------------------- mini-swe-agent


def mini_python(venv: Path) -> Path:
    """The python of mini-swe-agent's own venv, with the pinned version installed (made here on first use)."""
    python = venv / "bin" / "python"
    version = MINI_PIN.split("==")[1]
    probe = [str(python), "-c", "import minisweagent; print(minisweagent.__version__)"]
    env = {**os.environ, "MSWEA_SILENT_STARTUP": "1", "MSWEA_GLOBAL_CONFIG_DIR": str(venv / "mini-config")}
    if python.exists() and subprocess.run(probe, capture_output=True, text=True, env=env, check=False).stdout.strip() == version:
        return python
    print(f"peers: installing {MINI_PIN} into {venv}", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", MINI_PIN], check=True)
    return python


def tar_folder(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for child in sorted(folder.iterdir()):
            tf.add(child, arcname=child.name)
    return buf.getvalue()


def mini_job(task: Any, folder: Path, *, handle: Any, image: str, args: argparse.Namespace) -> dict[str, Any]:
    """The driver's job for one task: the repository at its base commit (and the wheelhouse) as tar files in
    `folder`, the served model, mini-swe-agent's config and the call limit."""
    from agentflow.swe.workspace import archive, cached_repo

    repo, commit = cached_repo(task)
    (folder / "repo.tar").write_bytes(archive(repo, commit))
    wheel_tar = None
    if task.wheelhouse:
        wheel_tar = folder / "wheels.tar"
        wheel_tar.write_bytes(tar_folder(task.local_path(task.wheelhouse, "wheelhouse")))
    return {
        "instance_id": task.instance_id, "problem_statement": task.problem_statement,
        "image": image, "repo_tar": str(folder / "repo.tar"), "wheel_tar": str(wheel_tar) if wheel_tar else None,
        "requirements": list(task.requirements), "config": args.mini_config, "step_limit": args.calls,
        "model_name": f"openai/{handle.model}", "api_base": handle.base_url,
        "sampling": mini_sampling(args),
        "trajectory": str(folder / "trajectory.json"), "result": str(folder / "result.json"),
    }


def mini_sampling(args: argparse.Namespace) -> dict[str, Any]:
    """The sampling options sent with each of mini-swe-agent's requests. Its SWE-bench configs set no temperature,
    so unless `--temperature` is given none is sent and the server samples as it does by default (greedy decoding
    makes a small model repeat its first command until the call limit)."""
    sampling: dict[str, Any] = {"max_tokens": args.max_tokens, "seed": args.seed, "timeout": args.task_timeout}
    if args.temperature is not None:
        sampling["temperature"] = args.temperature
    return sampling


def run_mini(chosen: list[tuple[str, Any]], *, handle: Any, image: str, args: argparse.Namespace,
             out: Path) -> dict[str, dict[str, Any]]:
    """mini-swe-agent on each task, one after another; a record per task (see `record`)."""
    python = mini_python(args.mini_venv)
    env = {**os.environ, "PEERS_API_KEY": handle.api_key, "MSWEA_SILENT_STARTUP": "1",
           "MSWEA_GLOBAL_CONFIG_DIR": str(out / "mini-config"),  # no user's .env: the run is the same anywhere
           "MSWEA_MODEL_RETRY_STOP_AFTER_ATTEMPT": "3", "MSWEA_COST_TRACKING": "ignore_errors",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}  # litellm would fetch its price list at import
    records: dict[str, dict[str, Any]] = {}
    for _, task in chosen:
        folder = out / MINI / task.instance_id
        folder.mkdir(parents=True, exist_ok=True)
        job = mini_job(task, folder, handle=handle, image=image, args=args)
        started = time.monotonic()
        drive(python, job, folder / "driver.log", env=env, timeout=args.task_timeout + 300)
        wall = time.monotonic() - started
        result = json.loads(Path(job["result"]).read_text()) if Path(job["result"]).is_file() else {
            "exit_status": "DriverFailed", "error": f"see {folder / 'driver.log'}"}
        records[task.instance_id] = record(
            patch=result.get("submission") or "", candidates=[result.get("diff") or ""],
            calls=int(result.get("calls") or 0),
            tokens=int(result.get("prompt_tokens") or 0) + int(result.get("completion_tokens") or 0),
            wall_s=wall, status=str(result.get("exit_status")))
        print(f"peers: {MINI} {task.instance_id}: {records[task.instance_id]['status']}, "
              f"{records[task.instance_id]['calls']} calls, {wall:.0f}s", file=sys.stderr, flush=True)
    return records


def drive(python: Path, job: dict[str, Any], log_path: Path, *, env: dict[str, str], timeout: float) -> None:
    """Run the driver on `job`; however this ends (a timeout, an interrupt) the driver is asked to stop first,
    so it removes its container."""
    with open(log_path, "w") as log:
        proc = subprocess.Popen([str(python), str(MINI_DRIVER)], stdin=subprocess.PIPE, stdout=log,
                                stderr=subprocess.STDOUT, env=env)
        try:
            proc.communicate(json.dumps(job).encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()


# ---------------------------------------------------------------- agentflow


def run_agentflow(chosen: list[tuple[str, Any]], workflow: str, *, handle: Any, args: argparse.Namespace,
                  out: Path) -> dict[str, dict[str, Any]]:
    """agentflow's repair (`workflow` as it ships) on the tasks of each file, in this process with the served
    model (as `agentflow bench --serve` runs it); a record per task."""
    from agentflow.cli.parts.serve_flag import served_loader
    from agentflow.repair.config import load_repair_config
    from agentflow.repair.run.runs import instance_dir, read_outcome, run_batch

    records: dict[str, dict[str, Any]] = {}
    for path in dict.fromkeys(p for p, _ in chosen):
        tasks = [t for p, t in chosen if p == path]
        cfg = load_repair_config([f"limits.step_limit={args.calls}", "workers=1", f"workflow={workflow}", *args.config])
        cfg.model = handle.spec
        cfg.inputs.tasks = str(path)
        cfg.inputs.instance_ids = [t.instance_id for t in tasks]
        run_dir = out / f"agentflow-{workflow}" / Path(path).parent.name
        started = time.monotonic()
        asyncio.run(run_batch(tasks, cfg, run_dir, model_loader=served_loader(handle, cfg.model_options)))
        wall = time.monotonic() - started
        for task in tasks:
            folder = instance_dir(run_dir, task.instance_id)
            outcome = read_outcome(folder / "outcome.json")
            rows = [json.loads(line) for line in _lines(folder / "candidates.jsonl")]
            if outcome is None:
                records[task.instance_id] = record(status="no outcome", wall_s=wall / len(tasks))
                continue
            records[task.instance_id] = record(
                patch=outcome.model_patch or "", candidates=[r["patch"] for r in rows if r.get("status") == "ok"],
                calls=int(outcome.usage.get("model_calls", 0)), tokens=int(outcome.usage.get("tokens", 0)),
                wall_s=outcome.duration_s or wall / len(tasks), status=str(outcome.status))
    return records


def _lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


# ---------------------------------------------------------------- grading and figures


def record(*, patch: str = "", candidates: Iterable[str] = (), calls: int = 0, tokens: int = 0, wall_s: float = 0.0,
           status: str = "") -> dict[str, Any]:
    """One system's work on one task: the submitted patch, its other candidates (distinct, non-empty, the
    submission not repeated), model calls, tokens, wall seconds and how it ended."""
    others = [c for c in dict.fromkeys(candidates) if c.strip() and c != patch]
    return {"patch": patch, "candidates": others, "calls": calls, "tokens": tokens, "wall_s": round(wall_s, 1),
            "status": status}


def patches_to_grade(results: dict[str, dict[str, dict[str, Any]]]) -> dict[str, list[str]]:
    """Each task's distinct non-empty patches over every system (submissions and candidates), graded once each."""
    out: dict[str, list[str]] = {}
    for per_task in results.values():
        for iid, rec in per_task.items():
            out.setdefault(iid, [])
            for patch in [rec["patch"], *rec["candidates"]]:
                if patch.strip() and patch not in out[iid]:
                    out[iid].append(patch)
    return out


async def grade(tasks: Sequence[Any], patches: dict[str, list[str]], out: Path) -> set[tuple[str, str]]:
    """The (instance id, patch) pairs that resolve their task, by agentflow's eval harness with the hidden tests;
    round r grades each task's r-th patch (the tasks of a round in parallel)."""
    from agentflow.swe import EvalConfig, Prediction, evaluate_predictions

    resolving: set[tuple[str, str]] = set()
    for r in range(max((len(v) for v in patches.values()), default=0)):
        preds = [Prediction(instance_id=iid, model_name_or_path="peers", model_patch=diffs[r])
                 for iid, diffs in patches.items() if r < len(diffs)]
        report = await evaluate_predictions([t for t in tasks if t.instance_id in patches], preds,
                                            EvalConfig(workers=2, rerun_failed=False), out_dir=out / f"grade-{r}")
        by_id = {p.instance_id: p.model_patch or "" for p in preds}
        resolving |= {(iid, by_id[iid]) for iid in report["resolved_ids"]}
    return resolving


def task_rows(per_task: dict[str, dict[str, Any]], resolving: set[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """Per task, what a system did as the JSON object keeps it: resolved (its submission resolves), covered (any
    of its patches does), submitted, candidates (how many besides the submission), calls, tokens, wall, status."""
    return {iid: {"resolved": (iid, rec["patch"]) in resolving,
                  "covered": any((iid, p) in resolving for p in [rec["patch"], *rec["candidates"]]),
                  "submitted": bool(rec["patch"].strip()),
                  **{k: v for k, v in rec.items() if k not in ("patch", "candidates")},
                  "candidates": len(rec["candidates"])}
            for iid, rec in per_task.items()}


def figures(rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A system's figures from its `task_rows`: resolved, coverage, submitted, calls, tokens, wall, statuses."""
    resolved = sorted(iid for iid, row in rows.items() if row["resolved"])
    covered = sorted(iid for iid, row in rows.items() if row["covered"])
    n = len(rows)
    calls = sum(row["calls"] for row in rows.values())
    statuses: dict[str, int] = {}
    for row in rows.values():
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    return {
        "resolved": len(resolved), "total": n, "resolve_rate": round(len(resolved) / n, 3) if n else 0.0,
        "resolved_ids": resolved, "coverage": len(covered), "covered_ids": covered,
        "submitted": sum(1 for row in rows.values() if row["submitted"]),
        "calls": calls, "calls_mean": round(calls / n, 2) if n else 0.0,
        "tokens": sum(row["tokens"] for row in rows.values()),
        "wall_s": round(sum(row["wall_s"] for row in rows.values()), 1),
        "statuses": dict(sorted(statuses.items())),
    }


def assemble(args: argparse.Namespace, chosen: list[tuple[str, Any]], results: dict[str, dict[str, dict[str, Any]]],
             resolving: set[tuple[str, str]], *, model: str) -> dict[str, Any]:
    """The ONE JSON object: the settings, each system's figures, and per task what each system did."""
    ids = [t.instance_id for _, t in chosen]
    rows = {name: task_rows(per_task, resolving) for name, per_task in results.items()}
    return {
        "benchmark": "peers", "model": model, "calls_per_task": args.calls,
        "tasks": [str(Path(p).resolve().relative_to(ROOT)) if Path(p).resolve().is_relative_to(ROOT) else p
                  for p in args.tasks],
        "limit": args.limit, "seed": args.seed, "part": list(args.part) if args.part else None,
        "commit": checkout_commit(), "concurrent": args.concurrent, "instances": ids,
        "mini_swe_agent": {"pin": MINI_PIN, "config": args.mini_config, "temperature": args.temperature,
                           "max_tokens": args.max_tokens},
        "agentflow_config": list(args.config),
        "systems": {name: figures(system_rows) for name, system_rows in rows.items()},
        "per_task": {iid: {name: system_rows[iid] for name, system_rows in rows.items() if iid in system_rows}
                     for iid in ids},
    }


SAME_IN_EVERY_PART = ("benchmark", "model", "calls_per_task", "tasks", "limit", "seed", "concurrent",
                      "mini_swe_agent", "agentflow_config")
"""What the parts of one run must agree on to be summed into it."""


def merge(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The JSON object of the whole run from those of its `--part` runs: the same settings, tasks in no two
    parts, every part's systems; figures recomputed from the per-task rows. A ValueError says what differs."""
    first = parts[0]
    for key in SAME_IN_EVERY_PART:
        differing = {json.dumps(p.get(key), sort_keys=True) for p in parts}
        if len(differing) > 1:
            raise ValueError(f"the parts differ in {key!r}: {sorted(differing)}")
    ids = [iid for p in parts for iid in p["instances"]]
    if len(set(ids)) != len(ids):
        raise ValueError(f"a task is in two parts: {sorted({i for i in ids if ids.count(i) > 1})}")
    names = list(dict.fromkeys(name for p in parts for name in p["systems"]))
    rows = {name: {iid: p["per_task"][iid][name] for p in parts for iid in p["instances"]
                   if name in p["per_task"].get(iid, {})} for name in names}
    missing = [name for name in names if len(rows[name]) != len(ids)]
    if missing:
        raise ValueError(f"not every part ran {', '.join(missing)}")
    return {**{key: first.get(key) for key in SAME_IN_EVERY_PART}, "part": None,
            "parts": [p.get("part") for p in parts], "commits": [p.get("commit") for p in parts], "instances": ids,
            "systems": {name: figures(rows[name]) for name in names},
            "per_task": {iid: {name: rows[name][iid] for name in names} for iid in ids}}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.merge:
        try:
            merged = merge([json.loads(path.read_text()) for path in args.merge])
        except (ValueError, KeyError) as exc:  # json.JSONDecodeError is a ValueError
            print(f"peers: cannot merge: {exc}", file=sys.stderr)
            return 2
        print(json.dumps(merged))
        return 0
    from agentflow.cli.parts.serve_flag import serving
    from agentflow.sandbox.image import ensure_image

    chosen = part_of(select_tasks(args.tasks, args.limit, args.seed), args.part)
    args.out.mkdir(parents=True, exist_ok=True)
    image = ensure_image()
    with serving(args.serve) as handle:
        assert handle is not None

        def run_system(name: str) -> dict[str, dict[str, Any]]:
            if name == MINI:
                return run_mini(chosen, handle=handle, image=image, args=args, out=args.out)
            return run_agentflow(chosen, name.split(":", 1)[1], handle=handle, args=args, out=args.out)

        if args.concurrent:  # side by side in time too: the server decodes both systems' requests together
            with ThreadPoolExecutor(len(systems(args))) as pool:
                futures = {name: pool.submit(run_system, name) for name in systems(args)}
                results = {name: future.result() for name, future in futures.items()}
        else:
            results = {name: run_system(name) for name in systems(args)}
        model = handle.model
    with tempfile.TemporaryDirectory() as tmp:
        resolving = asyncio.run(grade([t for _, t in chosen], patches_to_grade(results), Path(tmp)))
    result = assemble(args, chosen, results, resolving, model=model)
    (args.out / "peers.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
