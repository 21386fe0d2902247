"""SWE-bench task instances and predictions: the models and their loading.

Field names are SWE-bench's (test lists may be JSON-encoded strings, as in its datasets), plus optional set-up
fields: `test_cmd`, `requirements`, `wheelhouse`, `setup_commands`, `pytest_plugins`. A tasks file is
untrusted: every local path it names must lie, symlinks resolved, under its folder or a folder the user
allowed (`--allow-path`), and remote repositories are https/http/ssh/git URLs (no `ext::` or other helper).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import unquote

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agentflow.config import parse_json
from agentflow.errors import UserError

_GITHUB_NAME = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_REMOTE_SCHEMES = ("https://", "http://", "ssh://", "git://")
_SCP_LIKE = re.compile(r"^[A-Za-z0-9_.-]+@[A-Za-z0-9_.-]+:")
"""`git@github.com:owner/name.git`: ssh in git's short form."""


def _json_list(value: Any) -> Any:
    """SWE-bench stores test lists as JSON-encoded strings; accept both forms."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return []
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise ValueError("expected a list of test ids or a JSON-encoded list") from None
        except RecursionError:
            raise ValueError("the JSON-encoded list is nested too deeply to read; give a flat list of test ids") from None
    return value


class SWETask(BaseModel):
    """One task instance (SWE-bench field names, plus agentflow's optional set-up fields)."""

    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)

    instance_id: str = Field(min_length=1)
    """Unique id, e.g. `astropy__astropy-12907`."""
    repo: str = Field(min_length=1)
    """Local directory (relative to the tasks file), git URL, or GitHub `owner/name`."""
    base_commit: str = Field(min_length=4, pattern=r"^[0-9A-Za-z_][0-9A-Za-z._/-]*$")
    """Commit the task starts from."""
    problem_statement: str = ""
    """The issue text given to the solver."""
    hints_text: str = ""
    """Extra hints (comments on the issue); optional."""
    FAIL_TO_PASS: list[str]
    """Test ids (pytest node ids) that fail before the fix and must pass after it."""
    PASS_TO_PASS: list[str] = Field(default_factory=list)
    """Test ids that pass before the fix and must keep passing."""
    test_patch: str = ""
    """Diff adding/changing the tests that check the fix; applied at evaluation, hidden from the solver."""
    patch: str = ""
    """Reference (gold) fix, when the dataset carries it."""
    environment_setup_commit: str = ""
    version: str = ""
    created_at: str = ""
    test_cmd: str | None = None
    """Command that runs tests; test ids are appended. Default: `python -m pytest -rfE -p no:cacheprovider`."""
    requirements: list[str] = Field(default_factory=list)
    """Packages to pip-install before any test run, the repair's own and grading's (from `wheelhouse` when given:
    no index is used and nothing is resolved, so list every package the tests need beyond the sandbox image)."""
    wheelhouse: str | None = None
    """Directory of wheels (relative to the tasks file) to install `requirements` from, offline; without
    `requirements`, every wheel in it is installed."""
    setup_commands: list[str] = Field(default_factory=list)
    """Shell commands run in the workspace after checkout, before any patch."""
    pytest_plugins: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")]] = Field(
        default_factory=list)
    """pytest plugins (module names) the tests need beyond those of `requirements`, loaded by name: grading runs
    pytest with plugin autoloading off, so a plugin preinstalled in a custom sandbox image loads only when named."""
    base_dir: str | None = Field(default=None, exclude=True)
    """Folder of the tasks file (set by the loader; relative `repo`/`wheelhouse` resolve against it). A task
    that has one came from a file: its local paths must stay under this folder or `allowed_dirs`."""
    allowed_dirs: list[str] = Field(default_factory=list, exclude=True)
    """Other folders the task's local paths may name (`--allow-path`; set by the loader)."""

    @field_validator("FAIL_TO_PASS", "PASS_TO_PASS", "requirements", "setup_commands", "pytest_plugins", mode="before")
    @classmethod
    def _decode_lists(cls, value: Any) -> Any:
        return _json_list(value)

    def resolve_path(self, value: str) -> Path:
        path = Path(value).expanduser()
        if not path.is_absolute() and self.base_dir is not None:
            path = Path(self.base_dir) / path
        return path

    def confine(self, path: Path, field: str) -> Path:
        """`path` with symlinks resolved; for a task read from a file it must lie under the tasks file's folder
        or an allowed folder (a tasks file must not make agentflow copy host files into a sandbox)."""
        real = path.resolve()
        if self.base_dir is None:
            return real
        roots = [Path(self.base_dir), *(Path(d) for d in self.allowed_dirs)]
        if any(real == root or root in real.parents for root in roots):
            return real
        raise UserError(
            f"task {self.instance_id}: {field} {real} is outside the tasks file's folder {self.base_dir}",
            hint="move it beside the tasks file, or allow its folder with --allow-path DIR",
        )

    def local_path(self, value: str, field: str) -> Path:
        """A path the task names (relative to the tasks file), resolved and confined."""
        return self.confine(self.resolve_path(value), field)

    def _local_repo(self) -> Path | None:
        """The folder `repo` names when it is not a remote URL (confined; it may not exist)."""
        repo = self.repo
        if repo.startswith(_REMOTE_SCHEMES) or _SCP_LIKE.match(repo):
            return None
        if repo.startswith("file://"):
            repo = unquote(repo.removeprefix("file://"))
        elif "://" in repo or "::" in repo:
            raise UserError(f"task {self.instance_id}: repo {repo!r} uses a transport agentflow does not clone from",
                            hint="give an https://, ssh:// or git:// URL, owner/name, or a folder beside the tasks file")
        return self.local_path(repo, "repo")

    def check_paths(self) -> None:
        """Every local path the task names is confined (a UserError otherwise); nothing is read."""
        self._local_repo()
        if self.wheelhouse:
            self.local_path(self.wheelhouse, "wheelhouse")

    def repo_source(self) -> tuple[Literal["dir", "git"], str]:
        """Where the repository comes from: (`dir`, absolute path) or (`git`, URL)."""
        path = self._local_repo()
        if path is None:
            return "git", self.repo
        if path.is_dir():
            return "dir", str(path)
        if _GITHUB_NAME.match(self.repo) and not self.repo.startswith("."):
            return "git", f"https://github.com/{self.repo}.git"
        raise UserError(
            f"task {self.instance_id}: repo {self.repo!r} is neither a directory nor a git URL",
            hint="give a path relative to the tasks file, a git URL or owner/name",
        )


class Prediction(BaseModel):
    """One prediction in SWE-bench format."""

    model_config = ConfigDict(extra="ignore")

    instance_id: str = Field(min_length=1)
    model_name_or_path: str = "unknown"
    model_patch: str | None = None


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{what} file {path} not found", hint="check the path") from None
    except IsADirectoryError:
        raise UserError(f"{what} file {path} is a directory, expected a .jsonl or .json file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{what} file {path} cannot be read ({exc.__class__.__name__})") from None


def _records(path: Path, what: str) -> list[tuple[str, Any]]:
    """(location, record) pairs from a JSONL file, or a JSON list / object file."""
    text = _read_text(path, what)
    stripped = text.lstrip()
    if path.suffix == ".json" or (stripped.startswith("[") and path.suffix != ".jsonl"):
        data = parse_json(text, f"{path}: invalid JSON")
        if isinstance(data, dict) and all(isinstance(v, dict) for v in data.values()) and "instance_id" not in data:
            items = [{"instance_id": k, **v} for k, v in data.items()]  # SWE-bench's {id: prediction} form
        elif isinstance(data, dict):
            items = [data]
        elif isinstance(data, list):
            items = data
        else:
            raise UserError(f"{path}: expected a JSON list of {what}s, got {type(data).__name__}")
        return [(f"{path}: item {i}", item) for i, item in enumerate(items, start=1)]
    return [(f"{path}:{lineno}", parse_json(line, f"{path}:{lineno}: malformed {what} line"))
            for lineno, line in enumerate(text.splitlines(), start=1) if line.strip()]


def _validate(model: type[BaseModel], where: str, record: Any, what: str) -> Any:
    if not isinstance(record, dict):
        raise UserError(f"{where}: malformed {what}: expected a JSON object, got {type(record).__name__}")
    try:
        return model.model_validate(record)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise UserError(f"{where}: malformed {what}: field {field}: {err['msg']}") from None


def _no_duplicates(items: Iterable[Any], path: Path, what: str) -> None:
    seen: set[str] = set()
    for item in items:
        if item.instance_id in seen:
            raise UserError(f"{path}: {what} {item.instance_id!r} appears twice", hint="keep one line per instance_id")
        seen.add(item.instance_id)


def load_tasks(path: str | Path, allow_paths: Iterable[str | Path] = ()) -> list[SWETask]:
    """Read task instances from a JSONL (one per line) or JSON file; every problem is a one-line UserError.

    Local paths a task names must lie under the file's folder or one of `allow_paths` (checked here, before
    anything is read or copied)."""
    p = Path(path)
    allowed = [str(_allowed_dir(d)) for d in allow_paths]
    tasks = []
    for where, record in _records(p, "task"):
        task = _validate(SWETask, where, record, "task")
        task.base_dir = str(p.resolve().parent)
        task.allowed_dirs = list(allowed)
        task.check_paths()
        tasks.append(task)
    if not tasks:
        raise UserError(f"{p}: no tasks in the file")
    _no_duplicates(tasks, p, "task")
    return tasks


def _allowed_dir(path: str | Path) -> Path:
    real = Path(path).expanduser().resolve()
    if not real.is_dir():
        raise UserError(f"--allow-path {path} is not a folder", hint="give an existing folder")
    return real


def load_predictions(path: str | Path) -> list[Prediction]:
    """Read predictions (JSONL, a JSON list, or SWE-bench's JSON object keyed by instance_id)."""
    p = Path(path)
    preds = [_validate(Prediction, where, record, "prediction") for where, record in _records(p, "prediction")]
    _no_duplicates(preds, p, "prediction")
    return preds


def select_tasks(tasks: Sequence[SWETask], instance_ids: Iterable[str] | None) -> list[SWETask]:
    """The tasks with the given ids, in the given order (all when None); an unknown id is a UserError."""
    if instance_ids is None:
        return list(tasks)
    by_id = {t.instance_id: t for t in tasks}
    out = []
    for iid in instance_ids:
        if iid not in by_id:
            known = ", ".join(sorted(by_id)[:5]) + (", ..." if len(by_id) > 5 else "")
            raise UserError(f"unknown instance id {iid!r}", hint=f"known ids: {known}")
        out.append(by_id[iid])
    return out


def write_jsonl(path: str | Path, records: Iterable[BaseModel | dict[str, Any]]) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "w", encoding="utf-8") as fh:
        for rec in records:
            data = rec.model_dump(mode="json") if isinstance(rec, BaseModel) else rec
            fh.write(json.dumps(data, ensure_ascii=False) + "\n")
