"""A run record (`run.json`) bound to the user who made it: a keyed MAC over what a resume executes with.

A resume, fork or `--history` takes the workflow, model, sandbox and workspace from `run.json`. A run folder
copied from elsewhere could then choose `--sandbox local`, a model URL that receives the user's API key, the
folder `--apply` writes into, or a workflow whose Python gets imported. So whoever writes a record signs the
fields a command executes with (`SIGNED_FIELDS`) with HMAC-SHA256 under a key of this user's, kept in

    $AGENTFLOW_CONFIG_DIR/run-key        (default $XDG_CONFIG_HOME/agentflow/run-key, else ~/.config/agentflow)

made on first use (32 random bytes, mode 0600, never written anywhere else). A record is the user's own when
its `mac` verifies; any other record (no MAC, a wrong one, or no key on this machine) is data only: its
options are not used (`agentflow.graph.run.run_options.resolve_options` says what the user gives instead).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from agentflow.errors import UserError

MAC_FIELD = "mac"
SIGNED_FIELDS = ("run_id", "thread_id", "workflow", "model", "serve", "sandbox", "workspace", "config", "limits",
                 "forked_from")
"""The fields of run.json a command executes with (or that name the run); status fields are not signed."""
_PREFIX = "hmac-sha256:"
_KEY_FILE = "run-key"


def key_path() -> Path:
    """The run key's file in the user's agentflow config folder (not created here)."""
    root = os.environ.get("AGENTFLOW_CONFIG_DIR") or os.path.join(
        os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config"), "agentflow"
    )
    return Path(root) / _KEY_FILE


def _read_key(path: Path) -> bytes | None:
    """The key in `path` (None when there is none); refused when it is a link, or others may read it."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UserError(f"cannot read the run key {path}: {exc.strerror or exc.__class__.__name__}",
                        hint="remove it (a new one is made; runs signed with it then need their options given)"
                        ) from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise UserError(f"the run key {path} is not a private file of yours (mode {st.st_mode & 0o777:o})",
                            hint=f"chmod 600 {path}, or remove it to make a new one")
        key = fh.read().strip()
    if len(key) < 32:
        raise UserError(f"the run key {path} is too short", hint="remove it: a new one is made on the next run")
    return key


def _make_key(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = secrets.token_hex(32).encode()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except FileExistsError:  # another process made it first
        found = _read_key(path)
        if found is None:
            raise UserError(f"the run key {path} vanished while being made", hint="run the command again") from None
        return found
    with os.fdopen(fd, "wb") as fh:
        fh.write(key + b"\n")
    return key


def run_key(*, create: bool) -> bytes | None:
    """This user's run key; made when missing and `create` (a reader never makes one: no key, nothing verifies)."""
    path = key_path()
    key = _read_key(path)
    if key is None and create:
        key = _make_key(path)
    return key


def _mac(key: bytes | None, record: dict[str, Any]) -> str:
    signed = {name: record.get(name) for name in SIGNED_FIELDS}
    text = json.dumps(signed, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return _text_mac(key, text, b"agentflow-run-record-v1\0")


def sign(record: dict[str, Any]) -> dict[str, Any]:
    """`record` with its MAC (over `SIGNED_FIELDS` as they are in `record`: sign what is written, redacted)."""
    mac = _mac(run_key(create=True), record)
    return {**{k: v for k, v in record.items() if k != MAC_FIELD}, MAC_FIELD: mac}


YAML_MAC = "# agentflow-mac: "
"""The first line of a signed YAML record (`config.resolved.yaml`): a comment, so every YAML reader skips it."""


def _text_mac(key: bytes | None, text: str, domain: bytes = b"agentflow-run-config-v1\0") -> str:
    assert key is not None
    return _PREFIX + hmac.new(key, domain + text.encode(), hashlib.sha256).hexdigest()


def sign_yaml(text: str) -> str:
    """`text` (a YAML document, as written) with a first line holding its MAC."""
    return f"{YAML_MAC}{_text_mac(run_key(create=True), text)}\n{text}"


def verified_yaml(text: str) -> str | None:
    """The YAML document of a signed `text` when this user's key signed it, else None."""
    first, newline, body = text.partition("\n")
    if not newline or not first.startswith(YAML_MAC):
        return None
    key = run_key(create=False)
    if key is None or not hmac.compare_digest(first[len(YAML_MAC):], _text_mac(key, body)):
        return None
    return body


def verified(record: dict[str, Any]) -> bool:
    """Whether `record` was signed by this user's key (False when it has no MAC or there is no key)."""
    mac = record.get(MAC_FIELD)
    if not isinstance(mac, str):
        return False
    key = run_key(create=False)
    return key is not None and hmac.compare_digest(mac, _mac(key, record))
