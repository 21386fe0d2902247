"""Build the sandbox base image `agentflow-sandbox:<version>`.

Two paths: `dockerfile` (docker build of `sandboxes/Dockerfile`, needs a registry for the base image) and
`offline` (debootstrap a minimal Debian root filesystem from the host's apt mirror with
`sandboxes/rootfs.sh`, then `docker import`). `auto` uses the Dockerfile when the registry answers and the
offline recipe otherwise. The rootfs tarball is cached under `cache_dir()/sandbox/`, so rebuilds are fast.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Literal

from agentflow.config import cache_dir
from agentflow.errors import SandboxError, UserError
from agentflow.resources import data_dir
from agentflow.sandbox.config import DEFAULT_IMAGE
from agentflow.sandbox.docker import LABEL, docker_client

Method = Literal["auto", "offline", "dockerfile"]
IMPORT_CHANGES = ["USER 1000:1000", "WORKDIR /workspace", "ENV HOME=/tmp LANG=C.UTF-8 PATH=/usr/local/bin:/usr/bin:/bin",
                  'CMD ["python3"]', "LABEL org.agentflow.sandbox-image=1"]


def _log(msg: str) -> None:
    print(f"[sandbox build] {msg}", file=sys.stderr, flush=True)


def image_exists(tag: str = DEFAULT_IMAGE) -> bool:
    import docker.errors

    try:
        docker_client().images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def registry_reachable(timeout: float = 3.0) -> bool:
    try:
        urllib.request.urlopen("https://registry-1.docker.io/v2/", timeout=timeout)
        return True
    except urllib.error.HTTPError:
        return True  # 401 means it answered
    except Exception:  # noqa: BLE001 - any failure means "not reachable"
        return False


def apt_mirror() -> str:
    """The Debian mirror configured for the host's apt (deb822 or one-line sources)."""
    found: list[str] = []
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        try:
            text = path.read_text()
        except OSError:
            continue
        found += re.findall(r"^URIs:\s*(\S+/debian)/?\s*$", text, flags=re.MULTILINE)
        found += re.findall(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+/debian)/?\s+\S+", text, flags=re.MULTILINE)
    return found[0] if found else "http://deb.debian.org/debian"


def _recipe_hash() -> str:
    recipe = data_dir("sandboxes") / "rootfs.sh"
    return hashlib.sha256(recipe.read_bytes()).hexdigest()[:12]


def build_rootfs(mirror: str | None = None, *, force: bool = False) -> Path:
    """Debootstrap the root filesystem (cached as a tarball keyed by the recipe's hash)."""
    out = cache_dir() / "sandbox" / f"rootfs-{_recipe_hash()}.tar"
    if out.exists() and not force:
        _log(f"using cached root filesystem {out}")
        return out
    if shutil.which("debootstrap") is None:
        raise UserError("the offline sandbox build needs debootstrap", hint="apt-get install -y debootstrap (as root)")
    if os.geteuid() != 0:
        raise UserError("the offline sandbox build must run as root (debootstrap needs it)", hint="use sudo")
    out.parent.mkdir(parents=True, exist_ok=True)
    mirror = mirror or apt_mirror()
    with tempfile.TemporaryDirectory(prefix="agentflow-rootfs-") as tmp:
        root = Path(tmp) / "root"
        _log(f"debootstrap from {mirror} (about a minute)")
        recipe = ["sh", str(data_dir("sandboxes") / "rootfs.sh"), str(root), mirror]
        proc = subprocess.run(recipe, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
            raise SandboxError(f"debootstrap failed: {tail[0]} (check the mirror {mirror} and network access)")
        partial = out.with_suffix(".partial")
        subprocess.run(["tar", "-C", str(root), "--numeric-owner", "-cf", str(partial), "."], check=True)
        partial.rename(out)
    return out


def _import_rootfs(tarball: Path, tag: str) -> None:
    client = docker_client()
    _log(f"docker import {tarball.name} as {tag}")
    with open(tarball, "rb") as fh:
        client.api.import_image_from_data(fh, repository=tag.split(":")[0], tag=tag.split(":")[1], changes=IMPORT_CHANGES)
    if not image_exists(tag):
        raise SandboxError(f"docker import did not produce {tag}")


def build_dockerfile(tag: str) -> None:
    import docker.errors

    _log(f"docker build {data_dir('sandboxes') / 'Dockerfile'} as {tag}")
    try:
        docker_client().images.build(path=str(data_dir("sandboxes")), dockerfile="Dockerfile", tag=tag, rm=True)
    except docker.errors.BuildError as exc:
        raise SandboxError(f"docker build failed: {exc.msg} (try 'agentflow sandbox build --offline')") from None


def build_image(
    method: Method = "auto", tag: str = DEFAULT_IMAGE, *, mirror: str | None = None, force: bool = False
) -> str:
    """Build the base image; returns the method used."""
    if method == "auto":
        method = "dockerfile" if registry_reachable() else "offline"
        _log(f"registry {'reachable' if method == 'dockerfile' else 'unreachable'}: using the {method} path")
    t0 = time.monotonic()
    if method == "dockerfile":
        build_dockerfile(tag)
    else:
        _import_rootfs(build_rootfs(mirror, force=force), tag)
    _log(f"built {tag} in {time.monotonic() - t0:.0f}s")
    return method


def ensure_image(tag: str = DEFAULT_IMAGE, method: Method = "auto") -> str:
    """Make sure the sandbox image exists (build it if missing); returns its tag. Used by tests and CI."""
    if not image_exists(tag):
        build_image(method, tag)
    return tag


# -- extra Python dependencies of a task's repository, installed offline -----------------------------------
def download_wheels(requirements: list[str], wheelhouse: Path | None = None) -> Path:
    """Download wheels for `requirements` on the host (which may reach PyPI) into a wheelhouse directory."""
    key = hashlib.sha256("\n".join(sorted(requirements)).encode()).hexdigest()[:12]
    wheelhouse = wheelhouse or cache_dir() / "sandbox" / f"wheelhouse-{key}"
    wheelhouse.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--python-version", "3.11"]
    argv += ["--platform", "manylinux2014_x86_64", "--platform", "any", "-d", str(wheelhouse), *requirements]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1:] or ["pip download failed"]
        raise UserError(f"cannot download wheels for {requirements}: {last[0]}")
    return wheelhouse


def build_deps_image(requirements: list[str], base: str = DEFAULT_IMAGE) -> str:
    """An image `base` + `requirements`, installed in a container from a host wheelhouse with `--no-index`."""
    key = hashlib.sha256((base + "\n" + "\n".join(sorted(requirements))).encode()).hexdigest()[:12]
    tag = f"{base.split(':')[0]}:deps-{key}"
    if image_exists(tag):
        return tag
    ensure_image(base)
    wheelhouse = download_wheels(requirements)
    client = docker_client()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(wheelhouse, arcname="wheelhouse")
    labels = {LABEL: "1", f"{LABEL}.pid": str(os.getpid())}
    container: Any = client.containers.create(base, command=["sleep", "infinity"], user="0", network_mode="none",
                                              labels=labels)
    try:
        container.start()
        container.put_archive("/tmp", buf.getvalue())
        pip = ["python3", "-m", "pip", "install", "--no-index", "--find-links", "/tmp/wheelhouse"]
        code, out = container.exec_run([*pip, "--break-system-packages", "--no-cache-dir", *requirements], user="0")
        if code != 0:
            raise SandboxError(f"installing {requirements} in the sandbox failed: {out.decode()[-300:]}")
        container.exec_run(["rm", "-rf", "/tmp/wheelhouse"], user="0")
        container.stop(timeout=1)
        repository, _, version = tag.partition(":")
        container.commit(repository=repository, tag=version, changes=["USER 1000:1000", 'CMD ["python3"]'])
    finally:
        container.remove(force=True)
    return tag
