"""Item 2: a tasks file is untrusted input. Its repository's own git config (filters, hooks, fsmonitor, ...)
never runs on the host, and every local path it names (`repo`, `wheelhouse`) stays beside the tasks file or under
a folder given with `--allow-path`: anything else is a one-line error (exit 2) before anything is copied."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.errors import UserError
from agentflow.swe.workspace import EVAL_DIR

from .conftest import TASKS_FILE, write_jsonl
from .hostile_git import ATTRIBUTES, WHERES, arm, fired, self_test

SECRET = "AKIA-test-key-3f9c2e71"
PATCH = "--- a/mod.py\n+++ b/mod.py\n@@ -1 +1 @@\n-VALUE = 1\n+VALUE = 2\n"
TEST = "import mod\n\n\ndef test_value():\n    assert mod.VALUE == 2\n"
WHEEL = TASKS_FILE.parents[1] / "real-tasks" / "wheelhouse" / "packaging-24.1-py3-none-any.whl"


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def _plain_repo(root: Path) -> Path:
    (root / "tests").mkdir(parents=True)
    (root / "mod.py").write_text("VALUE = 1\n")
    (root / "tests" / "test_mod.py").write_text(TEST)
    return root


def _git_repo(root: Path) -> Path:
    _plain_repo(root)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    return root


def _arm(repo: Path, markers: Path, where: str = "config") -> None:
    """Everything a repository's own `.git` can ask the host's git to run (`hostile_git`), each leaving a
    marker, with `.gitattributes` naming the drivers committed. First proven live on a twin repository: git
    working inside it does set markers off."""
    tmp = Path(tempfile.mkdtemp())
    for target, marks in ((_git_repo(tmp / "twin"), tmp / "m"), (repo, markers)):
        (target / ".gitattributes").write_text(ATTRIBUTES)
        _git(target, "add", ".gitattributes")
        _git(target, "commit", "-qm", "attributes")
        arm(target, marks, where)
    assert self_test(tmp / "twin", tmp / "m"), "the armed repository sets nothing off"
    shutil.rmtree(tmp)


def _bundle(tmp_path: Path, task: dict) -> tuple[Path, Path]:
    """A tasks file (in `tmp_path/bundle`) with one task and a predictions file fixing it."""
    bundle = tmp_path / "bundle"
    bundle.mkdir(exist_ok=True)
    record = {"instance_id": "demo__demo-1", "FAIL_TO_PASS": ["tests/test_mod.py::test_value"],
              "problem_statement": "VALUE must be 2", **task}
    tasks = write_jsonl(bundle / "tasks.jsonl", [record])
    preds = write_jsonl(tmp_path / "preds.jsonl", [{"instance_id": "demo__demo-1", "model_name_or_path": "m",
                                                    "model_patch": PATCH}])
    return tasks, preds


def _eval(tasks: Path, preds: Path, out: Path, *extra: str) -> int:
    return run(["eval", str(preds), "--tasks", str(tasks), "--sandbox", "local", "-o", str(out), "--json", *extra])


def _fired(markers: Path) -> list[str]:
    return fired(markers)


# ------------------------------------------------------------------ (a) the repository's config never runs


@pytest.mark.parametrize("where", WHERES)
@pytest.mark.parametrize("base", ["commit", "HEAD"])
def test_a_task_repos_git_config_never_runs_on_the_host(tmp_path: Path, base: str, where: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    repo = _git_repo(tmp_path / "bundle" / "repo")
    markers = tmp_path / "markers"
    _arm(repo, markers, where)
    tasks, preds = _bundle(tmp_path, {"repo": "repo", "base_commit": _git(repo, "rev-parse", "HEAD") if base == "commit" else "HEAD"})
    assert _eval(tasks, preds, tmp_path / "out") == 0
    assert '"resolved_instances": 1' in capsys.readouterr().out  # the set-up worked: the repository was used
    assert _fired(markers) == []


@pytest.mark.docker
def test_a_task_repos_smudge_filter_does_not_run_with_the_docker_backend(
        tmp_path: Path, docker_image: str, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _git_repo(tmp_path / "bundle" / "repo")
    markers = tmp_path / "markers"
    _arm(repo, markers)
    tasks, preds = _bundle(tmp_path, {"repo": "repo", "base_commit": _git(repo, "rev-parse", "HEAD")})
    argv = ["eval", str(preds), "--tasks", str(tasks), "--sandbox", "docker", "-c", f"sandbox.image={docker_image}",
            "-o", str(tmp_path / "out"), "--json"]
    assert run(argv) == 0
    assert '"resolved_instances": 1' in capsys.readouterr().out
    assert _fired(markers) == []


def test_the_users_global_git_config_does_not_apply_to_task_repositories(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A filter in the user's own config (git-lfs is one) would run on whatever a task's `.gitattributes` says."""
    markers = tmp_path / "markers"
    markers.mkdir()
    glob = tmp_path / "gitconfig"
    glob.write_text(f"[filter \"lfs\"]\n\tclean = touch {markers / 'clean'}; cat\n\tsmudge = touch {markers / 'smudge'}; cat\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(glob))
    repo = _plain_repo(tmp_path / "bundle" / "repo")
    (repo / ".gitattributes").write_text("* filter=lfs\n")
    from agentflow.swe.workspace import snapshot_commit

    base = snapshot_commit(repo, tmp_path / "snap")  # the test's own snapshot: the filter may run here
    shutil.rmtree(markers)
    markers.mkdir()
    tasks, preds = _bundle(tmp_path, {"repo": "repo", "base_commit": base})
    assert _eval(tasks, preds, tmp_path / "out") == 0
    assert '"resolved_instances": 1' in capsys.readouterr().out
    assert _fired(markers) == []


@pytest.mark.parametrize("where", WHERES)
async def test_repair_of_a_users_repository_does_not_run_its_git_config(tmp_path: Path, where: str) -> None:
    """`agentflow repair REPO` shares the set-up: a repository from a tarball may carry a hostile .git too."""
    from agentflow.sandbox import open_sandbox
    from agentflow.swe.workspace import repo_task, seed_workspace

    repo = _git_repo(tmp_path / "repo")
    markers = tmp_path / "markers"
    _arm(repo, markers, where)
    task = repo_task(repo, "VALUE must be 2")
    assert task.base_commit == _git(repo, "rev-parse", "HEAD")
    async with open_sandbox("local") as sb:
        await seed_workspace(sb, task)
        assert (await sb.read_file("mod.py")) == "VALUE = 1\n"
    assert _fired(markers) == []


# ------------------------------------------------------------------ (b) paths stay inside the bundle


def _outside_wheelhouse(tmp_path: Path) -> Path:
    wheels = tmp_path / "elsewhere" / "wheels"
    wheels.mkdir(parents=True)
    shutil.copy(WHEEL, wheels)
    (wheels / "credentials").write_text(f"[default]\naws_secret_access_key = {SECRET}\n")
    return wheels


def _assert_refused(tmp_path: Path, code: int, err: str, field: str) -> None:
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert field in err and "--allow-path" in err
    assert not list(tmp_path.rglob("run_instance.log"))
    for path in (tmp_path / "out").rglob("*") if (tmp_path / "out").exists() else []:
        assert not path.is_file() or SECRET not in path.read_text(errors="replace")


@pytest.mark.parametrize("form", ["absolute", "relative", "symlink"])
def test_a_wheelhouse_outside_the_tasks_folder_is_refused(tmp_path: Path, form: str,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    wheels = _outside_wheelhouse(tmp_path)
    repo = _plain_repo(tmp_path / "bundle" / "repo")
    from agentflow.swe.workspace import snapshot_commit

    named = {"absolute": str(wheels), "relative": "../elsewhere/wheels", "symlink": "wheels"}[form]
    if form == "symlink":
        (tmp_path / "bundle" / "wheels").symlink_to(wheels)
    tasks, preds = _bundle(tmp_path, {
        "repo": "repo", "base_commit": snapshot_commit(repo, tmp_path / "snap"), "requirements": ["packaging==24.1"],
        "wheelhouse": named, "setup_commands": [f"cp {EVAL_DIR}/wheelhouse/credentials leaked.txt"],
        "test_cmd": "cat leaked.txt; python -m pytest -rA",
    })
    code = _eval(tasks, preds, tmp_path / "out")
    _assert_refused(tmp_path, code, capsys.readouterr().err, "wheelhouse")


def test_allow_path_admits_a_wheelhouse_elsewhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheels = _outside_wheelhouse(tmp_path)
    (wheels / "credentials").unlink()
    repo = _plain_repo(tmp_path / "bundle" / "repo")
    (repo / "tests" / "test_mod.py").write_text("import packaging\n\n" + TEST)
    from agentflow.swe.workspace import snapshot_commit

    tasks, preds = _bundle(tmp_path, {"repo": "repo", "base_commit": snapshot_commit(repo, tmp_path / "snap"),
                                      "requirements": ["packaging==24.1"], "wheelhouse": str(wheels)})
    assert _eval(tasks, preds, tmp_path / "out", "--allow-path", str(wheels.parent)) == 0
    assert '"resolved_instances": 1' in capsys.readouterr().out


def _outside_repo(tmp_path: Path) -> Path:
    repo = _git_repo(tmp_path / "elsewhere" / "private")
    (repo / "credentials").write_text(SECRET + "\n")
    _git(repo, "add", "credentials")
    _git(repo, "commit", "-qm", "keys")
    return repo


@pytest.mark.parametrize("form", ["absolute", "relative", "symlink", "file-url", "dot-git"])
def test_a_repo_outside_the_tasks_folder_is_refused(tmp_path: Path, form: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    private = _outside_repo(tmp_path)
    bare = tmp_path / "elsewhere" / "private.git"
    _git(tmp_path, "clone", "-q", "--bare", str(private), str(bare))
    (tmp_path / "bundle").mkdir()
    if form == "symlink":
        (tmp_path / "bundle" / "repo").symlink_to(private)
    named = {"absolute": str(private), "relative": "../elsewhere/private", "symlink": "repo",
             "file-url": f"file://{private}", "dot-git": str(bare)}[form]
    tasks, preds = _bundle(tmp_path, {"repo": named, "base_commit": "HEAD",
                                      "test_cmd": "cat credentials; python -m pytest -rA"})
    code = _eval(tasks, preds, tmp_path / "out")
    _assert_refused(tmp_path, code, capsys.readouterr().err, "repo")


def test_a_git_file_pointing_outside_the_tasks_folder_is_refused(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    private = _outside_repo(tmp_path)
    repo = tmp_path / "bundle" / "repo"
    repo.mkdir(parents=True)
    (repo / ".git").write_text(f"gitdir: {private / '.git'}\n")
    tasks, preds = _bundle(tmp_path, {"repo": "repo", "base_commit": "HEAD",
                                      "test_cmd": "cat credentials; python -m pytest -rA"})
    code = _eval(tasks, preds, tmp_path / "out")
    _assert_refused(tmp_path, code, capsys.readouterr().err, "repo")


def _hop(folder: Path, alternates: str) -> Path:
    """An object folder (`folder/objects`) with nothing but an alternates file."""
    (folder / "objects" / "info").mkdir(parents=True)
    (folder / "objects" / "info" / "alternates").write_text(alternates)
    return folder / "objects"


def _c_quoted(path: Path, octal: bool = False) -> str:
    return '"' + (str(path).replace("/", "\\057") if octal else str(path)) + '"\n'


@pytest.mark.parametrize("form", ["plain", "relative", "quoted", "quoted-octal", "nested", "nested-quoted",
                                  "nested-relative", "after-a-comment"])
def test_object_alternates_outside_the_tasks_folder_are_refused(tmp_path: Path, form: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """`objects/info/alternates` read as git reads it: C-quoted paths, relative ones, alternates of alternates."""
    private = _outside_repo(tmp_path)
    objects = private / ".git" / "objects"
    repo = tmp_path / "bundle" / "repo"
    _git(tmp_path, "clone", "-q", "--shared", str(private), str(repo))  # its objects are the private repository's
    info = repo / ".git" / "objects" / "info" / "alternates"
    relative = os.path.relpath(objects, repo / ".git" / "objects")
    if form.startswith("nested"):
        inner = {"nested": f"{objects}\n", "nested-quoted": _c_quoted(objects),
                 "nested-relative": os.path.relpath(objects, tmp_path / "bundle" / "hop" / "objects") + "\n"}[form]
        hop = _hop(tmp_path / "bundle" / "hop", inner)
        info.write_text(f"{hop}\n")
    else:
        info.write_text({"plain": f"{objects}\n", "relative": f"{relative}\n", "quoted": _c_quoted(objects),
                         "quoted-octal": _c_quoted(objects, octal=True),
                         "after-a-comment": f"# mirror\n{_c_quoted(objects)}"}[form])
    tasks, preds = _bundle(tmp_path, {"repo": "repo", "base_commit": "HEAD",
                                      "test_cmd": "cat credentials; python -m pytest -rA"})
    code = _eval(tasks, preds, tmp_path / "out")
    _assert_refused(tmp_path, code, capsys.readouterr().err, "alternate")


def test_alternates_nested_deeper_than_git_reads_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _git_repo(tmp_path / "bundle" / "repo")
    last = repo / ".git" / "objects"
    for depth in range(8):  # a chain inside the tasks folder, longer than git follows
        last = _hop(tmp_path / "bundle" / f"hop{depth}", f"{last}\n")
    (repo / ".git" / "objects" / "info" / "alternates").write_text(f"{last}\n")
    tasks, preds = _bundle(tmp_path, {"repo": "repo", "base_commit": "HEAD"})
    assert _eval(tasks, preds, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "nested more than" in err, err


def test_a_symlink_in_a_task_directory_cannot_read_a_host_file(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    secret = tmp_path / "elsewhere" / "credentials"
    secret.parent.mkdir()
    secret.write_text(SECRET + "\n")
    repo = _plain_repo(tmp_path / "bundle" / "repo")
    (repo / "notes.txt").symlink_to(secret)
    tasks, preds = _bundle(tmp_path, {"repo": "repo", "base_commit": "0" * 40,
                                      "test_cmd": "cat notes.txt; python -m pytest -rA"})
    code = _eval(tasks, preds, tmp_path / "out")
    _assert_refused(tmp_path, code, capsys.readouterr().err, "repo")


@pytest.mark.parametrize("command", ["bench", "repair"])
def test_bench_and_repair_refuse_a_repo_outside_the_tasks_folder(tmp_path: Path, command: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    private = _outside_repo(tmp_path)
    tasks, _ = _bundle(tmp_path, {"repo": str(private), "base_commit": "HEAD"})
    cassette = tmp_path / "c.json"
    cassette.write_text('{"version": 1, "entries": []}')
    tasks_arg = [str(tasks)] if command == "bench" else ["--tasks", str(tasks)]
    argv = [command, *tasks_arg, "--sandbox", "local", "--model", f"replay:{cassette}", "-o", str(tmp_path / "out")]
    assert run(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "repo" in err and "--allow-path" in err
    assert not (tmp_path / "out").exists()


def test_load_tasks_checks_paths_up_front(tmp_path: Path) -> None:
    from agentflow.swe.tasks import load_tasks

    private = _outside_repo(tmp_path)
    tasks, _ = _bundle(tmp_path, {"repo": str(private), "base_commit": "HEAD"})
    with pytest.raises(UserError, match="outside"):
        load_tasks(tasks)
    (task,) = load_tasks(tasks, allow_paths=[tmp_path / "elsewhere"])
    assert task.repo_source() == ("dir", str(private.resolve()))


def test_the_shipped_examples_stay_inside_their_folders() -> None:
    from agentflow.swe.tasks import load_tasks

    for tasks_file in (TASKS_FILE, TASKS_FILE.parents[1] / "real-tasks" / "tasks.jsonl"):
        for task in load_tasks(tasks_file):
            kind, source = task.repo_source()
            assert kind == "dir" and tasks_file.parent.resolve() in Path(source).parents
