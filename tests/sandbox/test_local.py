"""The local-process backend (no Docker needed; not a security boundary)."""

from __future__ import annotations

import asyncio

import pytest

from agentflow.sandbox import SandboxPool, open_sandbox, sh_command


async def test_local_exec_files_timeout():
    async with open_sandbox("local") as sb:
        assert sb.info().backend == "local"
        res = await sb.exec("echo $((6*7)); pwd")
        assert res.stdout.splitlines() == ["42", sb.workdir]
        await sb.write_file("d/x.txt", "hello")
        assert await sb.read_file("d/x.txt") == "hello"
        slow = await sb.exec("sleep 30", timeout=0.5)
        assert slow.timed_out and slow.exit_code == 124
        big = await sb.exec("head -c 200000 /dev/zero | tr '\\0' y")
        assert big.truncated and big.omitted_bytes > 100_000
    import os

    assert not os.path.exists(sb.workdir)  # the temp dir is removed


async def test_a_script_passes_through_sh_command_as_written():
    script = """x='it'"'"'s'; printf '%s|%s\\n' "$x" "$(echo a;  echo b)"; exit 4"""
    async with open_sandbox("local") as sb:
        res = await sb.exec(sh_command(script) + " && echo not-reached")
    assert res.exit_code == 4 and res.stdout == "it's|a\nb\n"  # quotes, $( ), exit status kept, one command


async def test_local_pool_snapshot_restore():
    async with SandboxPool(2, backend="local") as pool:
        a, b = await pool.acquire(), await pool.acquire()
        await a.write_file("f.txt", "one\n")
        sid = await a.snapshot()
        await a.write_file("f.txt", "two\n")
        await b.restore(sid)
        assert await b.read_file("f.txt") == "one\n"
        assert "+two" in await a.diff(sid)
        await pool.release(a)
        await pool.release(b)


@pytest.mark.parametrize("bad", [{"memory_mb": 1}, {"cpus": 0}, {"command_timeout_s": 99999}, {"bogus": 1}])
async def test_bad_limits_are_one_line_config_errors(bad):
    from agentflow.errors import ConfigError

    with pytest.raises(ConfigError) as info:
        async with open_sandbox("local", bad):
            pass
    assert "\n" not in str(info.value) and str(info.value).startswith("sandbox config: ")


async def test_effective_settings_and_commands_are_recorded():
    from agentflow.events import EventLog

    log = EventLog(None, run_id="t")
    async with open_sandbox(
        "local", {"command_timeout_s": 7, "env": {"API_TOKEN": "s3cr3t-value"}}, events=log
    ) as sb:
        await sb.exec("echo hi")
    kinds = [e.kind for e in log.events]
    assert kinds == ["sandbox.start", "sandbox.exec"]
    start = log.events[0].data
    assert start["backend"] == "local" and start["settings"]["command_timeout_s"] == 7
    assert start["settings"]["network"] is False
    assert log.events[1].data["exit_code"] == 0
    assert "s3cr3t-value" not in str([e.data for e in log.events])


async def test_local_reset_only_touches_its_own_workspace(tmp_path):
    marker = tmp_path / "host-file.txt"
    marker.write_text("keep me")
    async with SandboxPool(1, backend="local") as pool:
        sb = await pool.acquire()
        await sb.write_file("junk.txt", "x")
        await pool.release(sb)
        again = await pool.acquire()
        assert again is sb and (await sb.exec("ls -A")).stdout == ""
        await pool.release(again)
    assert marker.read_text() == "keep me"


async def test_snapshot_operations_at_the_same_time_do_not_race():
    """A run diffs its workspace after each node and as each checkpoint is written (graph/run/history.py), which
    can overlap: every diff and snapshot stages into one git index, so they must take turns, not fail on
    its lock file."""
    async with open_sandbox("local") as sb:
        for i in range(40):
            await sb.write_file(f"src/f{i}.txt", f"line {i}\n" * 200)
        await sb.set_base()
        for i in range(40):
            await sb.write_file(f"src/f{i}.txt", f"changed {i}\n")
        results = await asyncio.gather(*(sb.diff() for _ in range(6)), sb.snapshot(), sb.diff())
    assert all("+changed 39" in r for r in results if r.startswith("diff"))
    assert len({r for r in results if r.startswith("diff")}) == 1


async def test_a_diff_whose_last_line_is_a_blank_context_line_applies():
    """A change followed by two lines and a blank one (a function above another): the diff's last line is
    " ", which the diff keeps, so it applies (it was cut off, and `run --apply` said "corrupt patch")."""
    source = "def a():\n    return 1\n\n\ndef b():\n    return 2\n"
    async with open_sandbox("local") as sb:
        await sb.write_file("m.py", source)
        await sb.set_base()
        await sb.write_file("m.py", source.replace("def a():", "def a(x):"))
        patch = await sb.diff()
        assert patch.endswith("\n ")  # the blank context line after `return 1`
        await sb.write_file("m.py", source)
        result = await sb.apply_patch(patch + "\n")
        assert result.ok, result.output
        assert (await sb.read_file("m.py")).startswith("def a(x):")
