"""A run's folder on disk, one writer for `agentflow run`, `repair` and `bench`: created (or found) once,
`config.resolved.yaml` and JSON files replaced atomically (a reader or a `kill -9` never sees half a file),
and `events.jsonl` appended across resumes (a line torn by a killed writer is cut first). Everything written
passes through `secrets.redact` (run folders are meant to be shared), and through `agentflow.runfiles`: a
link or special file the folder holds is never written through."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from agentflow.config import dump_yaml
from agentflow.errors import UserError
from agentflow.events import EventLog
from agentflow.runfiles import check_folder_entry, make_folder, replace_file, truncate_file
from agentflow.runrecord import sign_yaml
from agentflow.secrets import redact


def check_folder(path: str | Path) -> Path:
    """`path` as an output folder (`-o`), before anything is written: a one-line UserError when it, or a folder
    above it, is a file, or when the path cannot even be looked at (name too long, no permission)."""
    p = Path(path)
    try:
        blocker = next((a for a in (p, *p.parents) if a.exists() and not a.is_dir()), None)
    except OSError as exc:
        raise UserError(f"cannot use the folder {p}: {exc.strerror or exc.__class__.__name__}",
                        hint="give -o a folder you can write to") from None
    if blocker is not None:
        raise UserError(f"{blocker} is a file, not a folder", hint="give -o a folder; it is created if missing")
    return p


class RunDir:
    """The folder of one run (`runs/<run_id>/`)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @classmethod
    def create(cls, path: str | Path) -> RunDir:
        """The folder, made if missing; a one-line UserError when it cannot be (see `check_folder`)."""
        found = cls(check_folder(path))
        try:
            make_folder(found.path)
        except OSError as exc:
            raise UserError(f"cannot create the folder {found.path}: {exc.strerror or exc.__class__.__name__}",
                            hint="give -o a folder you can write to") from None
        return found

    @property
    def run_id(self) -> str:
        return self.path.name

    def write_text(self, name: str, text: str, *, code: bool = False) -> Path:
        """Replace `name` atomically (written beside it, then renamed), secrets redacted; `code=True` for
        text holding patches (known secrets only: see `secrets.CODE_KEYS`)."""
        return replace_file(self.path / name, redact(text, urls=not code))

    def write_json(self, name: str, data: Any, *, indent: int | None = None) -> Path:
        return replace_file(self.path / name, json.dumps(redact(data), indent=indent) + ("\n" if indent else ""))

    def write_jsonl(self, name: str, records: Iterable[Any]) -> Path:
        return replace_file(self.path / name, "".join(json.dumps(redact(r)) + "\n" for r in records))

    def write_config(self, config: BaseModel | dict[str, Any]) -> Path:
        """`config.resolved.yaml`: everything the run was started with, enough to repeat it (secrets masked:
        a resume asks for them again), signed with the user's run key (a resume goes on with it only then)."""
        return replace_file(self.path / "config.resolved.yaml", sign_yaml(dump_yaml(config)))

    def events(self, run_id: str | None = None) -> EventLog:
        """The run's event log, appended to (a half line left by a killed writer is cut first)."""
        check_folder_entry(self.path)
        path = self.path / "events.jsonl"
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            if data and not data.endswith(b"\n"):
                truncate_file(path, data.rfind(b"\n") + 1)
        return EventLog(path, run_id=run_id or self.run_id)
