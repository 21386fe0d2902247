"""Issue #50 part 5: the redaction at each sink covers every type and every way a byte stream is cut.

- `secrets.redact` (events, run folder files, calls.db, the viewer's data): values of every type, exceptions
  and pydantic models included, for each kind of secret.
- `serde_redact.redact_serialized` (checkpoints.db): every kind of value LangGraph's serializer writes, read
  back through the real saver (SQLite file, zstd blobs) with each kind of secret masked and its type kept.
- `RedactedStream` (stdout and stderr): a secret cut across writes and flushes, JSON lines kept parseable.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import io
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zstandard
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.types import Send
from pydantic import BaseModel

from agentflow.cli._output import RedactedStream
from agentflow.graph.persist.checkpoint import AgentflowSaver
from agentflow.graph.persist.serde import StrictSerde
from agentflow.graph.persist.serde_redact import redact_serialized
from agentflow.secrets import MASK, redact, register_secret

KNOWN = "sk-SINKSECRET-4711"  # a `-c ...api_key=` value: registered
ENV_VALUE = "envSINKSECRET-0815"  # the value of FOO_API_KEY
UNKNOWN_PASSWORD = "urlSINKpw"  # a URL's password nobody registered: masked by pattern
SECRETS = {
    "config_key": (KNOWN, f"Incorrect API key provided: {KNOWN}"),
    "env_key": (ENV_VALUE, f"FOO_API_KEY={ENV_VALUE}"),
    "url_password": (UNKNOWN_PASSWORD, f"http://user:{UNKNOWN_PASSWORD}@127.0.0.1:1/v1"),
}


@pytest.fixture(autouse=True)
def _secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    register_secret(KNOWN)
    monkeypatch.setenv("FOO_API_KEY", ENV_VALUE)


class Reply(BaseModel):
    text: str
    meta: dict[str, Any] = {}


@dataclasses.dataclass
class Step:
    note: str
    args: tuple[str, ...] = ()


class Colour(enum.Enum):
    RED = "red"


class ModelFailed(Exception):
    pass


# Each builds a value that holds `text` somewhere, in a type `redact` does not walk itself.
HOLDERS: dict[str, Callable[[str], Any]] = {
    "str": lambda t: t,
    "exception": lambda t: ModelFailed(f"call failed: {t}"),
    "exception_in_dict": lambda t: {"error": RuntimeError(t), "ok": False},
    "chained_args": lambda t: ValueError("bad", {"url": t}),
    "pydantic": lambda t: Reply(text=t, meta={"n": 1}),
    "dataclass": lambda t: Step(note="x", args=("a", t)),
    "set": lambda t: {t, "other"},
    "frozenset_in_list": lambda t: [frozenset({t})],
    "bytes": lambda t: t.encode(),
    "path": lambda t: Path("/tmp") / t,
    "message": lambda t: AIMessage(content=f"here: {t}"),
    "nested": lambda t: {"a": [({"b": Reply(text=t)},)]},
    "object_with_str": lambda t: type("Opaque", (), {"__str__": lambda self: f"opaque {t}"})(),
}


@pytest.mark.parametrize("kind", list(SECRETS))
@pytest.mark.parametrize("holder", list(HOLDERS))
def test_redact_leaves_no_secret_in_any_type(holder: str, kind: str) -> None:
    if (holder, kind) == ("path", "url_password"):
        pytest.skip("a path cannot hold a URL: it folds the '//'")
    secret, text = SECRETS[kind]
    out = redact(HOLDERS[holder](text))
    written = json.dumps(out, default=lambda v: v.decode() if isinstance(v, bytes) else str(v))
    assert secret not in written and "***" in written


# Every kind of value LangGraph writes to a checkpoint (msgpack extensions for most), plus raw bytes.
SERIALIZED: dict[str, Callable[[str], Any]] = {
    "str": lambda t: t,
    "list": lambda t: ["a", t],
    "dict_int_keys": lambda t: {1: t, "k": [t]},
    "tuple": lambda t: ("x", t),
    "set": lambda t: {t},
    "pydantic": lambda t: Reply(text=t, meta={"deep": [t]}),
    "dataclass": lambda t: Step(note=t, args=(t,)),
    "messages": lambda t: [HumanMessage(content=t), AIMessage(content="ok", additional_kwargs={"u": t}),
                           ToolMessage(content=t, tool_call_id="c1")],
    "send": lambda t: Send("node", {"arg": t}),
    "exception": lambda t: ModelFailed(f"call failed: {t}"),
    "enum_and_datetime": lambda t: {"c": Colour.RED, "at": datetime.datetime(2026, 1, 1), "why": t},
    "bytes": lambda t: t.encode(),
    "long": lambda t: {"log": "x" * 5000 + t},
}


@pytest.mark.parametrize("kind", list(SECRETS))
@pytest.mark.parametrize("value", list(SERIALIZED))
def test_checkpoint_bytes_hold_no_secret_for_any_value(value: str, kind: str, tmp_path: Path) -> None:
    secret, text = SECRETS[kind]
    original = SERIALIZED[value](text)
    saver = AgentflowSaver(tmp_path / "checkpoints.db", allowed_types=[Reply, Step, Colour])
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"], checkpoint["channel_versions"] = {"v": original}, {"v": 1}
    stored = saver.put(config, checkpoint, {"source": "loop", "step": 1, "note": text}, {"v": 1})
    saver.put_writes(stored, [("v", original), ("__error__", original)], task_id="task1")
    saver.flush()
    back = saver.get_tuple(stored)
    saver.close()
    cells = _all_cells(tmp_path / "checkpoints.db")
    assert not any(secret.encode() in c for c in cells)
    assert any(MASK.encode() in c for c in cells)
    assert back is not None
    restored = back.checkpoint["channel_values"]["v"]
    serde = StrictSerde([Reply, Step, Colour])
    assert type(restored) is type(serde.loads_typed(serde.dumps_typed(original)))  # as without redaction
    assert secret not in repr(restored) and "***" in repr(restored)


def test_a_patch_in_a_checkpoint_keeps_its_urls_but_not_known_secrets(tmp_path: Path) -> None:
    serde = StrictSerde()
    patch = f"+assert parse('http://u:pw@h') == 1\n+key = '{KNOWN}'\n"
    type_, data = serde.dumps_typed({"model_patch": patch, "log": "http://u:pw@h"})
    value = serde.loads_typed((type_, redact_serialized(type_, data)))
    assert value == {"model_patch": patch.replace(KNOWN, MASK), "log": "http://u:***@h"}


def test_a_value_without_secrets_is_stored_byte_for_byte() -> None:
    type_, data = StrictSerde().dumps_typed({"a": [1, 2.5, None, "http://host/x", Reply(text="plain")]})
    assert redact_serialized(type_, data) is data


def _all_cells(db: Path) -> list[bytes]:
    con = sqlite3.connect(db)
    cells: list[bytes] = []
    for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        for row in con.execute(f'SELECT * FROM "{table}"'):
            for cell in row:
                if isinstance(cell, bytes):
                    cells.append(cell)
                    if cell.startswith(b"\x28\xb5\x2f\xfd"):
                        cells.append(zstandard.ZstdDecompressor().decompressobj().decompress(cell))
                elif isinstance(cell, str):
                    cells.append(cell.encode())
    con.close()
    return cells


# -- printed streams --------------------------------------------------------------------------------------------


def _cuts(text: str) -> list[list[str]]:
    """`text` written in pieces: whole, one character at a time, and cut at every position once."""
    return [[text], list(text), *[[text[:i], text[i:]] for i in range(1, len(text))]]


@pytest.mark.parametrize("kind", list(SECRETS))
@pytest.mark.parametrize("flush_between", [False, True])
def test_a_secret_written_in_pieces_is_masked_whole(kind: str, flush_between: bool) -> None:
    secret, text = SECRETS[kind]
    line = json.dumps({"event": "node.end", "error": f"failed: {text}", "next": "http://other.host/"}) + "\n"
    for pieces in _cuts(line):
        inner = io.StringIO()
        stream = RedactedStream(inner)
        for piece in pieces:
            stream.write(piece)
            if flush_between:
                stream.flush()
        stream.drain()
        printed = inner.getvalue()
        assert secret not in printed and "***" in printed, pieces
        assert json.loads(printed)["next"] == "http://other.host/"  # still the JSON line it was


def test_a_prompt_is_shown_on_flush_and_the_rest_on_drain() -> None:
    inner = io.StringIO()
    stream = RedactedStream(inner)
    stream.write("approve? [y/N]: ")
    stream.flush()
    assert inner.getvalue() == "approve? [y/N]: "
    stream.write(f"partial {KNOWN[:5]}")
    stream.flush()
    assert inner.getvalue().endswith("partial ")  # the last word may be the start of a secret: held back
    stream.write(KNOWN[5:])
    stream.drain()
    assert inner.getvalue().endswith("partial ***")


URL_NEIGHBOURS = ["", "x", "a:b", "u:p@h", "http://", "@", ":", "http://q", "user:pass", "\\", '"']


@pytest.mark.parametrize("left", URL_NEIGHBOURS)
@pytest.mark.parametrize("right", URL_NEIGHBOURS)
def test_masking_urls_in_a_json_line_keeps_it_json(left: str, right: str) -> None:
    doc = {"a": f"{left}http://user:pw@host/{left}", "b": right, "c": [left, "http://x:1", right + "@h"]}
    for text in (json.dumps(doc), json.dumps(doc, separators=(",", ":")), json.dumps(doc, ensure_ascii=False)):
        masked = redact(text)
        assert json.loads(masked)["a"].startswith(f"{left}http://user:***@host/")


@pytest.mark.parametrize("kind", list(SECRETS))
def test_bytes_written_under_the_text_layer_are_redacted_too(kind: str) -> None:
    """The MCP stdio transport writes JSON-RPC lines to `sys.stdout.buffer`."""
    secret, text = SECRETS[kind]
    inner = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    stream = RedactedStream(inner)
    line = json.dumps({"jsonrpc": "2.0", "result": {"text": text}}).encode() + b"\n"
    for pieces in _cuts(line.decode()):
        for piece in pieces:
            stream.buffer.write(piece.encode())
            stream.buffer.flush()
    stream.drain()
    printed = inner.buffer.getvalue()
    assert secret.encode() not in printed and printed.count(b"***") == len(_cuts(line.decode()))
    assert all(json.loads(x) for x in printed.splitlines())


def test_only_the_key_serve_prints_for_its_clients_is_unredacted(capsys: pytest.CaptureFixture[str]) -> None:
    from agentflow.cli._output import print_unredacted, redacted_output

    with redacted_output():
        print(f"log line with {KNOWN}")
        print_unredacted(f"export AGENTFLOW_API_KEY={KNOWN}")
    assert capsys.readouterr().out.splitlines() == ["log line with ***", f"export AGENTFLOW_API_KEY={KNOWN}"]
