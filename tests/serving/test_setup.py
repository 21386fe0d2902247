"""Model assembly: chunks concatenated in order, SHA-256 checked, verified once, bad bytes refused."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import pytest

import agentflow.serving.setup as setup_mod
from agentflow.errors import DependencyMissing, UserError
from agentflow.serving.embedded import EmbeddedModel


@pytest.fixture()
def fake_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[bytes, list[Path]]:
    monkeypatch.setenv("AGENTFLOW_CACHE_DIR", str(tmp_path / "cache"))
    site = tmp_path / "site"
    parts = [b"GGUF" + bytes(range(256)) * 3, b"middle" * 1000, b"tail"]
    dirs = []
    for i, data in enumerate(parts, start=1):
        pkg = site / f"afchunktest_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(data)
        dirs.append(pkg)
    monkeypatch.syspath_prepend(str(site))
    return b"".join(parts), dirs


def _model(content: bytes, sha: str | None = None) -> EmbeddedModel:
    return EmbeddedModel(name="tiny", file_name="tiny.gguf", sha256=sha or hashlib.sha256(content).hexdigest(),
                         size=len(content), chunk_packages=tuple(f"afchunktest_part{i}" for i in (1, 2, 3)),
                         pip_names=tuple(f"afchunktest-part{i}" for i in (1, 2, 3)))


def test_assembles_verifies_and_then_trusts_the_marker(fake_chunks: tuple[bytes, list[Path]],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    content, dirs = fake_chunks
    monkeypatch.setattr(setup_mod, "embedded_model", lambda name: _model(content))
    messages: list[str] = []
    path = setup_mod.ensure_model("tiny", say=messages.append)
    assert path.read_bytes() == content
    assert any("assembling tiny from 3 chunk packages" in m for m in messages)
    for d in dirs:  # the chunks are no longer needed once the file is verified
        shutil.rmtree(d)
    messages.clear()
    assert setup_mod.ensure_model("tiny", say=messages.append) == path
    assert messages == []


def test_a_changed_file_is_rehashed_and_rebuilt(fake_chunks: tuple[bytes, list[Path]],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    content, _ = fake_chunks
    monkeypatch.setattr(setup_mod, "embedded_model", lambda name: _model(content))
    path = setup_mod.ensure_model("tiny", say=lambda m: None)
    path.write_bytes(b"corrupted")
    messages: list[str] = []
    assert setup_mod.ensure_model("tiny", say=messages.append).read_bytes() == content
    assert any("does not match" in m for m in messages)


def test_wrong_hash_is_refused_and_leaves_no_file(fake_chunks: tuple[bytes, list[Path]],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    content, _ = fake_chunks
    monkeypatch.setattr(setup_mod, "embedded_model", lambda name: _model(content, sha="0" * 64))
    with pytest.raises(UserError, match="SHA-256"):
        setup_mod.ensure_model("tiny", say=lambda m: None)
    leftovers = {p.name for p in setup_mod.models_dir().glob("tiny.gguf*")} - {"tiny.gguf.lock"}
    assert leftovers == set()


def test_missing_chunk_package_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTFLOW_CACHE_DIR", str(tmp_path))
    model = EmbeddedModel(name="tiny", file_name="tiny.gguf", sha256="0" * 64, size=1,
                          chunk_packages=("afchunktest_absent_part1",), pip_names=("afchunktest-absent-part1",))
    monkeypatch.setattr(setup_mod, "embedded_model", lambda name: model)
    with pytest.raises(DependencyMissing, match=r"afchunktest-absent-part1.*agentflow\[local\]"):
        setup_mod.ensure_model("tiny", say=lambda m: None)


def test_binary_override_must_be_executable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(setup_mod.BINARY_ENV, str(tmp_path / "nope"))
    with pytest.raises(UserError, match="AGENTFLOW_LLAMA_SERVER"):
        setup_mod.find_llama_server()
    monkeypatch.setenv(setup_mod.BINARY_ENV, sys.executable)
    assert setup_mod.find_llama_server() == Path(sys.executable)


AVX512_CPUINFO = """processor\t: 0
model name\t: AMD EPYC
flags\t\t: fpu sse2 avx avx2 fma f16c bmi2 avx512f avx512dq avx512bw avx512vl avx512_vnni avx512vbmi
"""
AVX2_CPUINFO = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma f16c bmi2\n"


def test_cpu_level_turns_on_the_avx512_extensions_the_cpu_lists() -> None:
    level, flags = setup_mod.cpu_level(setup_mod.cpu_flags(AVX512_CPUINFO))
    assert level == "avx512"
    assert flags == ("-DGGML_AVX512=ON", "-DGGML_AVX512_VNNI=ON", "-DGGML_AVX512_VBMI=ON")
    assert setup_mod.cpu_level(setup_mod.cpu_flags(AVX2_CPUINFO)) == ("avx2", ())
    # a CPU without readable flags (ARM, macOS) builds llama.cpp's default
    assert setup_mod.cpu_level(setup_mod.cpu_flags("processor\t: 0\nFeatures\t: neon\n")) == ("avx2", ())


def test_binaries_of_different_cpu_levels_are_cached_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv(setup_mod.BINARY_ENV, raising=False)
    avx2 = setup_mod.llama_server_dir(level="avx2")
    avx2.mkdir(parents=True)
    (avx2 / "llama-server").write_text("#!/bin/sh\n")
    (avx2 / "llama-server").chmod(0o755)
    monkeypatch.setattr(setup_mod, "cpu_level", lambda flags=None: ("avx512", ("-DGGML_AVX512=ON",)))
    assert setup_mod.find_llama_server() is None  # an AVX2 build is not taken for an AVX-512 machine's
    monkeypatch.setattr(setup_mod, "cpu_level", lambda flags=None: ("avx2", ()))
    assert setup_mod.find_llama_server() == avx2 / "llama-server"
