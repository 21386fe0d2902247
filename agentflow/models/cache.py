"""An on-disk response cache (one SQLite file) in front of any model.

Keyed by the model spec and the normalised request (`extra` and `top_p` included). Only deterministic
calls are cached (temperature 0 or a seed set) unless `force=True`. A hit is marked `cached=True` and
costs nothing (`usage.cost_usd = 0`); its token counts are kept so reports still show the call's size.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

from agentflow.models.base import ChatModel, ChatRequest, ChatResponse, ModelWrapper, StreamDelta, as_deltas
from agentflow.models.replay import key_fields
from agentflow.secrets import redact


def cacheable(request: ChatRequest) -> bool:
    return request.temperature == 0 or request.seed is not None


def cache_key(spec: str, request: ChatRequest) -> str:
    data = request.model_dump(mode="json", include=key_fields(request) | {"extra", "top_p", "response_schema_name"})
    blob = json.dumps({"spec": spec, "request": data}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    """A SQLite table of responses; safe to use from several threads and processes."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS responses "
                             "(key TEXT PRIMARY KEY, spec TEXT, response TEXT, created REAL)")

    def get(self, key: str) -> ChatResponse | None:
        with self._lock:
            row = self._db.execute("SELECT response FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else ChatResponse.model_validate_json(row[0])

    def put(self, key: str, spec: str, response: ChatResponse) -> None:
        # the key is a hash (of the spec as given, so it matches on resume); what is stored is redacted
        text = json.dumps(redact(response.model_dump(mode="json")))
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)",
                             (key, redact(spec), text, time.time()))

    def close(self) -> None:
        with self._lock:
            self._db.close()


class CachedModel(ModelWrapper):
    """Serves repeated deterministic calls from a `ResponseCache`; everything else goes to `inner`.

    `cache` is a file path (the model owns the cache) or a `ResponseCache` the caller owns and closes (one
    task's call journal shared by its role models); `close_inner=False` leaves `inner` open on `aclose`
    (a model shared by other users)."""

    def __init__(self, inner: ChatModel, cache: str | Path | ResponseCache, *, force: bool = False,
                 close_inner: bool = True) -> None:
        super().__init__(inner)
        self._owns_cache = not isinstance(cache, ResponseCache)
        self.cache = cache if isinstance(cache, ResponseCache) else ResponseCache(cache)
        self.force = force
        self.close_inner = close_inner

    def _key(self, request: ChatRequest) -> str | None:
        return cache_key(self.spec, request) if self.force or cacheable(request) else None

    async def _lookup(self, key: str | None) -> ChatResponse | None:
        if key is None:
            return None
        start = time.monotonic()
        hit = await asyncio.to_thread(self.cache.get, key)
        if hit is not None:
            hit.cached = True
            hit.usage.cost_usd = 0.0
            hit.latency_s = time.monotonic() - start
        return hit

    async def chat(self, request: ChatRequest) -> ChatResponse:
        key = self._key(request)
        hit = await self._lookup(key)
        if hit is not None:
            return hit
        response = await self.inner.chat(request)
        if key is not None:
            await asyncio.to_thread(self.cache.put, key, self.spec, response)
        return response

    async def stream(self, request: ChatRequest) -> AsyncIterator[StreamDelta]:
        key = self._key(request)
        hit = await self._lookup(key)
        if hit is not None:
            async for delta in as_deltas(hit):
                yield delta
            return
        async for delta in self.inner.stream(request):
            if delta.response is not None and key is not None:
                await asyncio.to_thread(self.cache.put, key, self.spec, delta.response)
            yield delta

    async def aclose(self) -> None:
        if self.close_inner:
            await self.inner.aclose()
        if self._owns_cache:
            self.cache.close()
