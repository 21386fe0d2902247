"""Record any model's calls to a cassette file and replay them deterministically.

Cassette format (JSON): `{"version": 1, "match": "request" | "sequence", "interactions": [{"request":
<ChatRequest>, "response": <ChatResponse>}, ...]}`. With `match: request` a call is served by the next
unused interaction whose normalised request (see `request_key`) equals it; with `match: sequence`
interactions are served in order whatever was asked (hand-written scripted scenarios). Hand-written
cassettes may omit optional fields; with `sequence` the `request` may be omitted altogether.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from agentflow.config import parse_json
from agentflow.errors import ReplayMiss, UserError
from agentflow.models.base import ChatModel, ChatRequest, ChatResponse, ModelWrapper, StreamDelta, as_deltas
from agentflow.runfiles import make_folder, replace_file
from agentflow.secrets import redact

CASSETTE_VERSION = 1
KEY_FIELDS = {"messages", "tools", "tool_choice", "response_schema", "n", "temperature", "seed", "max_tokens", "stop"}
"""The request fields that decide a reply (`extra` and `top_p` rarely matter to a replay)."""


class Interaction(BaseModel):
    request: ChatRequest | None = None
    response: ChatResponse


class Cassette(BaseModel):
    version: int = CASSETTE_VERSION
    match: Literal["request", "sequence"] = "request"
    interactions: list[Interaction] = Field(default_factory=list)


def key_fields(request: ChatRequest) -> set[str]:
    """The fields a request is matched by: `KEY_FIELDS`, and `raw` when set (so the keys of chat requests are
    those cassettes recorded before the field existed)."""
    return KEY_FIELDS | {"raw"} if request.raw else KEY_FIELDS


def request_key(request: ChatRequest) -> str:
    """Canonical JSON of the request's `key_fields`."""
    return json.dumps(request.model_dump(mode="json", include=key_fields(request)), sort_keys=True,
                      separators=(",", ":"))


def last_user_text(request: ChatRequest, limit: int = 60) -> str:
    for m in reversed(request.messages):
        if m.role == "user" and m.content:
            text = " ".join(m.content.split())
            return text if len(text) <= limit else text[: limit - 3] + "..."
    return ""


def load_cassette(path: str | Path) -> Cassette:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"cassette {p} not found", hint="check the path after 'replay:'") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cassette {p} cannot be read: {exc.__class__.__name__}") from None
    data = parse_json(text, f"cassette {p}: invalid JSON")
    try:
        cassette = Cassette.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise UserError(f"cassette {p}: {loc}: {err['msg']}", hint="see docs/concepts/models.md") from None
    if cassette.version != CASSETTE_VERSION:
        raise UserError(f"cassette {p}: version {cassette.version} is not supported (expected {CASSETTE_VERSION})")
    if cassette.match == "request" and any(i.request is None for i in cassette.interactions):
        raise UserError(f"cassette {p}: every interaction needs a 'request' when match is 'request'",
                        hint='add the requests or set "match": "sequence"')
    return cassette


def write_cassette(path: str | Path, cassette: Cassette) -> None:
    """Write atomically (`runfiles.replace_file`), secrets redacted, optional fields left out."""
    make_folder(Path(path).parent)
    replace_file(path, json.dumps(redact(cassette.model_dump(mode="json", exclude_none=True)), indent=1) + "\n")


class ReplayModel:
    """Serves calls from a cassette; a call it does not hold raises `ReplayMiss`."""

    def __init__(self, path: str | Path, *, spec: str | None = None) -> None:
        self.path = Path(path)
        self.spec = spec or f"replay:{path}"
        self.cassette = load_cassette(self.path)
        self._used = [False] * len(self.cassette.interactions)
        self._keys = [request_key(i.request) if i.request is not None else None for i in self.cassette.interactions]
        self._calls = 0
        self._lock = asyncio.Lock()

    @property
    def remaining(self) -> int:
        """Interactions not served yet."""
        return self._used.count(False)

    def _take(self, request: ChatRequest) -> ChatResponse:
        self._calls += 1
        if self.cassette.match == "sequence":
            index = next((i for i, used in enumerate(self._used) if not used), None)
        else:
            key = request_key(request)
            index = next((i for i, k in enumerate(self._keys) if not self._used[i] and k == key), None)
        if index is None:
            why = "no interactions left" if self.remaining == 0 else "no unused interaction matches this request"
            raise ReplayMiss(f"{self.spec}: call #{self._calls} ({why}; last user message: "
                             f"{last_user_text(request)!r})", hint="re-record the cassette or fix the request")
        self._used[index] = True
        response = self.cassette.interactions[index].response.model_copy(deep=True)
        response.cached = True
        return response

    async def chat(self, request: ChatRequest) -> ChatResponse:
        # the recorded latency is kept, so a replayed run's events are the same every time
        async with self._lock:
            return self._take(request)

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        async for delta in as_deltas(await self.chat(request)):
            yield delta

    async def aclose(self) -> None:
        return None


class RecordingModel(ModelWrapper):
    """Passes calls to `inner` and writes each request/response pair to a cassette (rewritten after every call)."""

    def __init__(self, inner: ChatModel, path: str | Path, *,
                 match: Literal["request", "sequence"] = "request") -> None:
        super().__init__(inner)
        self.path = Path(path)
        self.cassette = Cassette(match=match)
        self._lock = asyncio.Lock()

    async def _record(self, request: ChatRequest, response: ChatResponse) -> None:
        async with self._lock:
            self.cassette.interactions.append(Interaction(request=request, response=response))
            write_cassette(self.path, self.cassette)

    async def chat(self, request: ChatRequest) -> ChatResponse:
        response = await self.inner.chat(request)
        await self._record(request, response)
        return response

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        async for delta in self.inner.stream(request):
            if delta.response is not None:
                await self._record(request, delta.response)
            yield delta
