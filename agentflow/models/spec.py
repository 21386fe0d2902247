"""Model spec strings (`FORMS`) -> `ChatModel`: `load_model("openai:gpt-4o-mini", concurrency=4)`. Backend
modules (and their SDKs) are imported only when a spec needs them."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from agentflow.config import cache_dir, validate_config
from agentflow.errors import UserError
from agentflow.models.base import ChatModel
from agentflow.models.options import HOSTED_KEYS, ModelOptions, hosted_api_key
from agentflow.secrets import redact, register_secrets_in

FORMS = {
    "openai": "openai:MODEL", "anthropic": "anthropic:MODEL", "openai-compatible": "openai-compatible:BASE_URL#MODEL",
    "litellm": "litellm:PROVIDER/MODEL", "local": "local:NAME", "replay": "replay:PATH", "test": "test",
    "function": "function:MODULE:CALLABLE",
}
"""Scheme -> the form of its specs."""
ACCEPTED = ", ".join(FORMS.values())
UNCONFIGURED = ("replay", "test", "function")
"""Schemes whose models take no options (a scripted or test model has no endpoint, retries or cache)."""


@dataclass(frozen=True)
class ModelSpec:
    """A parsed spec: `scheme`, `model` (name, local name or cassette path) and `base_url` (openai-compatible)."""

    scheme: str
    model: str
    base_url: str | None = None
    text: str = ""


def _bad(spec: str, why: str) -> UserError:
    return UserError(redact(f"bad model spec {spec!r}: {why}; accepted forms: {ACCEPTED}"))


def parse_spec(spec: str) -> ModelSpec:
    """Parse and check a spec string; any problem is a one-line UserError naming the accepted forms. A
    password in its URL is registered as a secret (every file of the run redacts it)."""
    register_secrets_in(spec)
    text = spec.strip()
    scheme, sep, rest = text.partition(":")
    if not sep and text != "test":
        raise _bad(spec, "missing 'SCHEME:'")
    if scheme not in FORMS:
        raise _bad(spec, f"unknown scheme {scheme!r}")
    rest = rest.strip()
    if scheme == "test":
        return ModelSpec("test", rest, None, text)
    if scheme == "openai-compatible":
        url, hash_, model = rest.rpartition("#")
        if not hash_:
            raise _bad(spec, "missing '#MODEL' after the base URL")
        if not model.strip():
            raise _bad(spec, "missing model name after '#'")
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise _bad(spec, f"base URL {url!r} is not an http(s) URL")
        try:
            parsed.port  # noqa: B018 - raises on a malformed port
        except ValueError:
            raise _bad(spec, f"base URL {url!r} has a malformed port") from None
        return ModelSpec(scheme, model.strip(), url.rstrip("/"), text)
    if not rest:
        raise _bad(spec, f"missing {'PATH' if scheme == 'replay' else 'model name'} after '{scheme}:'")
    if scheme == "litellm":
        provider, slash, name = rest.partition("/")
        if not slash or not provider or not name:
            raise _bad(spec, "litellm specs need PROVIDER/MODEL, e.g. litellm:groq/llama-3.1-8b-instant")
    return ModelSpec(scheme, rest, None, text)


_BACKENDS = {
    "openai": ("openai_backend", "OpenAIChatModel"),
    "openai-compatible": ("openai_backend", "OpenAIChatModel"),
    "anthropic": ("anthropic_backend", "AnthropicChatModel"),
    "litellm": ("litellm_backend", "LiteLLMChatModel"),
}
"""Scheme of a provider's model -> (module of `agentflow.models.backends`, class), imported when needed."""


def check_can_start(spec: str) -> None:
    """A one-line UserError when the model `spec` names cannot be built: a hosted provider's model (`openai:`,
    `anthropic:`) with no API key in the environment, a `replay:` cassette that cannot be read. Run before a run
    creates its folder (the model itself checks the same when it is built)."""
    parsed = parse_spec(spec)
    if parsed.scheme in HOSTED_KEYS:
        hosted_api_key(parsed.scheme, parsed.text, None)
    elif parsed.scheme == "replay":
        from agentflow.models.replay import load_cassette

        load_cassette(parsed.model)


def load_model(spec: str, **options: Any) -> ChatModel:
    """Build the model a spec names. Options: see `ModelOptions` (`local:` passes them to its loader)."""
    parsed = parse_spec(spec)
    if parsed.scheme in UNCONFIGURED and options:
        raise UserError(f"{parsed.scheme} models take no options (got {', '.join(sorted(options))})")
    if parsed.scheme == "replay":
        from agentflow.models.replay import ReplayModel

        return ReplayModel(Path(parsed.model), spec=parsed.text)
    if parsed.scheme == "test":
        from agentflow.models.testing import TestModel, parse_test_options

        return TestModel(spec=parsed.text, **parse_test_options(parsed.model, parsed.text))
    if parsed.scheme == "function":
        from agentflow.models.testing import load_function

        return load_function(parsed.model, parsed.text)
    if parsed.scheme == "local":
        try:
            local = importlib.import_module("agentflow.models.backends.local")
        except ModuleNotFoundError as exc:
            if exc.name != "agentflow.models.backends.local":
                raise
            raise UserError(f"{spec}: local models are not available in this installation "
                            "(agentflow.models.backends.local is missing)", hint="reinstall agentflow") from None
        return local.load_local_model(parsed.model, **options)  # type: ignore[no-any-return]

    opts = validate_config(ModelOptions, options, source=f"options of model {spec!r}")
    module, name = _BACKENDS[parsed.scheme]
    backend = getattr(importlib.import_module(f"agentflow.models.backends.{module}"), name)
    extra = {"compatible_base_url": parsed.base_url} if parsed.scheme == "openai-compatible" else {}
    model: ChatModel = backend(parsed.text, parsed.model, opts, **extra)
    if opts.cache:
        from agentflow.models.cache import CachedModel

        path = cache_dir() / "responses.sqlite" if opts.cache is True else Path(opts.cache)
        model = CachedModel(model, path, force=opts.cache_force)
    return model


def served_model(handle: Any, **options: Any) -> ChatModel:
    """An `openai-compatible` ChatModel for a running server (`agentflow.serving.ServerHandle`); it does not
    own the server. Options as for `load_model`."""
    return load_model(handle.spec, api_key=handle.api_key, **options)
