"""A resumed run goes on with the settings its finished tasks had: a resume that changes another one is refused
(one line, exit 2, the folder untouched); how the run is carried out may change (`RESUME_MAY_CHANGE`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentflow.cli.main import run
from agentflow.config import dump_yaml, load_yaml
from agentflow.repair.config import RESUME_MAY_CHANGE, RepairConfig, changed_on_resume, load_repair_config
from agentflow.repair.outcome import InstanceOutcome
from agentflow.rundir import RunDir
from agentflow.runrecord import sign_yaml

from .conftest import TASKS_FILE

FIRST = json.loads(TASKS_FILE.read_text().splitlines()[0])["instance_id"]


def _leaves(data: Any, prefix: str = "") -> list[str]:
    if not isinstance(data, dict):
        return [prefix]
    return [p for k, v in data.items() for p in _leaves(v, f"{prefix}.{k}" if prefix else k)]


def _set(data: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = json.loads(json.dumps(data))
    *parents, last = path.split(".")
    node = out
    for key in parents:
        node = node[key]
    node[last] = value
    return out


def test_every_setting_but_how_the_run_is_carried_out_is_compared() -> None:
    cfg = load_repair_config([])
    written = load_yaml(dump_yaml(cfg), "test")
    assert changed_on_resume(written, cfg) == []
    paths = _leaves(written)
    assert len(paths) > 50  # every leaf of the run's settings, whatever sections it has
    for path in paths:
        recorded = _set(written, path, ["another value"])
        may_change = any(path == keep or path.startswith(keep + ".") for keep in RESUME_MAY_CHANGE)
        changed = changed_on_resume(recorded, cfg)
        if may_change:
            assert changed == [], path
        else:
            assert len(changed) == 1 and changed[0].startswith(f"{path}: "), path


def test_a_setting_the_run_did_not_record_counts_as_changed() -> None:
    cfg = load_repair_config(["nodes.*.noop_escalation=[suspect]"])
    recorded = load_yaml(dump_yaml(load_repair_config([])), "test")
    assert changed_on_resume(recorded, cfg) == [
        "nodes.*.noop_escalation: now ['suspect'] (the run's: None)"]


def _finished_run(out: Path, cfg: RepairConfig) -> InstanceOutcome:
    """A run folder as `bench` leaves it: the settings signed, one task finished."""
    RunDir.create(out).write_config(cfg)
    outcome = InstanceOutcome(instance_id=FIRST, status="submitted", model_patch="")
    inst = out / "instances" / FIRST
    inst.mkdir(parents=True)
    (inst / "outcome.json").write_text(outcome.model_dump_json())
    return outcome


def _files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


def test_resume_with_another_setting_is_refused_and_the_run_is_kept(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    cfg = load_repair_config(["backend=local", f"inputs.tasks={TASKS_FILE}", "limits.step_limit=12"])
    _finished_run(out, cfg)
    before = _files(out)
    argv = ["bench", str(TASKS_FILE), "-i", FIRST, "--sandbox", "local", "-o", str(out), "--resume"]
    assert run([*argv, "-c", "sampling.temperature=0.2"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "sampling.temperature: now 0.2 (the run's: 0.7)" in err and "-o" in err
    assert _files(out) == before
    # a tasks file other than the run's is another setting too
    other = tmp_path / "tasks.jsonl"
    other.write_text(TASKS_FILE.read_text().splitlines()[0] + "\n")
    assert run(["bench", str(other), "--sandbox", "local", "-o", str(out), "--resume"]) == 2
    assert "inputs.tasks: now" in capsys.readouterr().err
    assert _files(out) == before


def test_resume_with_other_workers_goes_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    cfg = load_repair_config(["backend=local", f"inputs.tasks={TASKS_FILE}", f"inputs.instance_ids=[{FIRST}]"])
    outcome = _finished_run(out, cfg)
    # as an earlier version wrote it: without a section this one has (its defaults are what that version ran)
    record = out / "config.resolved.yaml"
    settings = load_yaml(record.read_text().split("\n", 1)[1], "test")
    del settings["edit"]
    record.write_text(sign_yaml(yaml.safe_dump(settings, sort_keys=False)))
    code = run(["bench", str(TASKS_FILE), "-i", FIRST, "--sandbox", "local", "-o", str(out), "--resume",
                "--workers", "3", "-c", "model_options.timeout_s=900", "--json"])
    assert code == 0, capsys.readouterr().err
    report = json.loads((out / "report.json").read_text())
    assert report["instances"][FIRST]["status"] == str(outcome.status)  # finished: not run again
    assert "workers: 3" in (out / "config.resolved.yaml").read_text()


def test_a_model_served_on_this_machine_is_the_same_model_on_another_port() -> None:
    def spec(port: int, name: str = "qwen") -> RepairConfig:
        return load_repair_config([f"model=openai-compatible:http://127.0.0.1:{port}/v1#{name}"])

    recorded = load_yaml(dump_yaml(spec(41001)), "test")
    assert changed_on_resume(recorded, spec(52002)) == []
    assert [c.split(":")[0] for c in changed_on_resume(recorded, spec(52002, "gemma"))] == ["model"]
