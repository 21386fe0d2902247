"""`redactor()`: URL passwords always, secret-named variables, never stale after the environment changed."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from agentflow.secrets import is_secret_key, redact, redactor, register_secret, register_secrets_in


def test_without_secret_variables_urls_are_still_scrubbed() -> None:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "PYTHONPATH")}
    code = (
        "import os; from agentflow.secrets import redactor; r0 = redactor(); "
        "os.environ['MY_API_KEY'] = 'abcdefgh-1234'; r1 = redactor(); "
        "print(r0('postgresql://u:pw@h/db abcdefgh-1234'), r1('k=abcdefgh-1234'))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["postgresql://u:***@h/db", "abcdefgh-1234", "k=***"]


@pytest.mark.parametrize(
    "name",
    ["AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID", "GITHUB_TOKEN", "HF_TOKEN", "PGPASSWORD", "OPENAI_KEY",
     "GOOGLE_APPLICATION_CREDENTIALS", "DB_PASSWD", "SENTRY_DSN", "MY_PRIVATE_KEY", "ANTHROPIC_API_KEY"],
)
def test_credential_named_variables_are_secrets(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    monkeypatch.setenv(name, "value-that-is-secret-42")
    assert redact({"log": "got value-that-is-secret-42"}) == {"log": "got ***"}


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("postgresql://user:pw@host:5432/db", "postgresql://user:***@host:5432/db"),
        ("redis://:hunter2@cache:6379", "redis://:***@cache:6379"),
        ("https://ghp_0123456789abcdefghij@github.com/o/r", "https://***@github.com/o/r"),
        ("ssh://git@github.com/o/r", "ssh://git@github.com/o/r"),
        ("mail me at a@b.com", "mail me at a@b.com"),
    ],
)
def test_passwords_inside_urls_are_redacted(text: str, want: str) -> None:
    assert redact(text) == want


def test_a_secret_set_after_the_first_call_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    redactor()  # warm the cache
    monkeypatch.setenv("LATE_API_KEY", "late-secret-value-1")
    scrub = redactor()
    assert scrub is not None and scrub("x late-secret-value-1 y") == "x *** y"
    monkeypatch.setenv("LATE_API_KEY", "other-secret-value-2")  # same variable, new value
    scrub = redactor()
    assert (
        scrub is not None and scrub("other-secret-value-2 late-secret-value-1") == "*** late-secret-value-1"
    )
    monkeypatch.delenv("LATE_API_KEY")
    assert redact("other-secret-value-2") == "other-secret-value-2"


def test_registering_a_secret_takes_effect_at_once() -> None:
    redactor()
    register_secret("registered-now-987")
    assert redact({"args": ["--key", "registered-now-987"]}) == {"args": ["--key", "***"]}


def test_containers_are_copied_only_when_something_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_TOKEN", "tok-abcdefgh")
    scrub = redactor()
    assert scrub is not None
    clean = {"a": [1, "plain", ("x", 2.0)], "b": None}
    assert scrub(clean) is clean
    dirty = {"a": [1, ("see tok-abcdefgh", 2)], "b": "plain"}
    out = scrub(dirty)
    assert out == {"a": [1, ("see ***", 2)], "b": "plain"}
    assert type(out["a"][1]) is tuple and dirty["a"][1][0] == "see tok-abcdefgh"  # the input is untouched


def test_a_secret_inside_another_is_redacted_longest_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INNER_TOKEN", "inner-12345")
    monkeypatch.setenv("OUTER_TOKEN", "prefix-inner-12345-suffix")
    assert redact("a prefix-inner-12345-suffix b inner-12345") == "a *** b ***"


@pytest.mark.parametrize(
    ("key", "secret"),
    [("api_key", True), ("openai_api_key", True), ("hf_token", True), ("GITHUB_TOKEN", True), ("password", True),
     ("db_password", True), ("client_secret", True), ("Authorization", True), ("api_key_env", False),
     ("bearer_token_env", False), ("token_file", False), ("max_tokens", False), ("tokenizer", False),
     ("journal_key", False), ("input_key", False)],
)
def test_which_config_keys_hold_secrets(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


def test_a_config_registers_its_secrets_wherever_they_are() -> None:
    register_secrets_in({
        "model_options": {"api_key": "cfg-key-0123456789", "api_key_env": "MY_PROVIDER_KEY_VAR"},
        "model": "openai-compatible:http://user:url-pass-4567@127.0.0.1:1/v1#m",
        "config": ["trace.content=true", "nodes.x.auth_token=item-token-abcdef"],  # run.json's -c items
        "max_tokens": "123456789",
    })
    text = "cfg-key-0123456789 url-pass-4567 item-token-abcdef MY_PROVIDER_KEY_VAR 123456789"
    assert redact(text) == "*** *** *** MY_PROVIDER_KEY_VAR 123456789"


def test_code_keeps_urls_but_not_known_secrets() -> None:
    register_secret("known-secret-24680")
    patch = '+    assert parse("http://user:pass1234@host") == ("user", "pass1234")  # known-secret-24680\n'
    out = redact({"model_patch": patch, "log": patch})
    assert out["model_patch"] == patch.replace("known-secret-24680", "***")
    assert "pass1234@" not in out["log"] and "known-secret-24680" not in out["log"]
    assert redact(patch, urls=False) == out["model_patch"]
