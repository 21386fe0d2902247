"""Serving parts that need no llama-server: command lines, environment, metrics, flags, process hygiene."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentflow.cli.main import run
from agentflow.errors import ConfigError, UserError
from agentflow.events import EventLog
from agentflow.events.kinds import ServerMetrics
from agentflow.models.base import ChatRequest, Message
from agentflow.serving.completion import FewShotTemplate
from agentflow.serving.flag import parse_serve_flag
from agentflow.serving.llamacpp import llama_server_argv
from agentflow.serving.metrics import parse_prometheus, summarize
from agentflow.serving.ports import pick_free_port, port_is_free
from agentflow.serving.process import ManagedProcess, reap_orphans, run_dir
from agentflow.serving.server import Launch, ServerHandle, ServerStartError
from agentflow.serving.vllm import VllmServerOptions, vllm_argv, vllm_env
from agentflow.serving.vllm_engine import sampling_kwargs


def _flag_value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


# --- llama-server command line ---------------------------------------------------------------------
def test_llama_server_argv_uses_documented_flags_and_total_context() -> None:
    argv = llama_server_argv("/bin/llama-server", "/m.gguf", port=4321, alias="gemma3-270m", parallel=8, ctx=2048,
                             threads=2, extra_args=["--temp", "0.5"])
    assert argv[0] == "/bin/llama-server"
    assert _flag_value(argv, "-m") == "/m.gguf"
    assert _flag_value(argv, "--host") == "127.0.0.1"
    assert _flag_value(argv, "--port") == "4321"
    assert _flag_value(argv, "--parallel") == "8"
    assert _flag_value(argv, "--ctx-size") == str(8 * 2048)  # each slot gets ctx-size / parallel
    assert _flag_value(argv, "--threads") == "2"
    assert "--metrics" in argv and "--cont-batching" in argv
    assert argv[-2:] == ["--temp", "0.5"]
    assert not any("api-key" in a for a in argv)  # the key travels in LLAMA_API_KEY


# --- vLLM command line and environment -------------------------------------------------------------
def test_vllm_argv_maps_every_option_to_its_documented_flag() -> None:
    opts = VllmServerOptions(model="Qwen/Qwen2.5-Coder-7B-Instruct", executable="vllm", gpu_memory_utilization=0.85,
                             max_model_len=8192, tensor_parallel_size=2, enable_prefix_caching=True,
                             dtype="bfloat16", tool_call_parser="hermes", extra_args=["--seed", "1"])
    argv = vllm_argv(opts, port=8011)
    assert argv[:3] == ["vllm", "serve", "Qwen/Qwen2.5-Coder-7B-Instruct"]
    assert _flag_value(argv, "--host") == "127.0.0.1"
    assert _flag_value(argv, "--port") == "8011"
    assert _flag_value(argv, "--gpu-memory-utilization") == "0.85"
    assert _flag_value(argv, "--max-model-len") == "8192"
    assert _flag_value(argv, "--tensor-parallel-size") == "2"
    assert "--enable-prefix-caching" in argv
    assert _flag_value(argv, "--dtype") == "bfloat16"
    assert "--enable-auto-tool-choice" in argv and _flag_value(argv, "--tool-call-parser") == "hermes"
    assert _flag_value(argv, "--served-model-name") == "Qwen/Qwen2.5-Coder-7B-Instruct"
    assert argv[-2:] == ["--seed", "1"]
    assert not any("api-key" in a for a in argv)


def test_vllm_argv_leaves_unset_options_to_vllm_defaults() -> None:
    argv = vllm_argv(VllmServerOptions(model="m", executable="vllm", enable_prefix_caching=False), port=1)
    for flag in ("--gpu-memory-utilization", "--max-model-len", "--tensor-parallel-size", "--dtype",
                 "--enable-prefix-caching", "--enable-auto-tool-choice"):
        assert flag not in argv
    assert "--no-enable-prefix-caching" in argv


def test_vllm_env_carries_key_and_disables_usage_stats() -> None:
    env = vllm_env(api_key="k" * 20)
    assert env["VLLM_API_KEY"] == "k" * 20
    assert env["VLLM_NO_USAGE_STATS"] == "1" and env["DO_NOT_TRACK"] == "1"


def test_vllm_options_reject_bad_values() -> None:
    with pytest.raises(ValueError):
        VllmServerOptions(model="m", gpu_memory_utilization=1.5)
    with pytest.raises(ValueError):
        VllmServerOptions(model="m", unknown_option=1)  # type: ignore[call-arg]


def test_cli_vllm_dry_run_prints_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["serve", "vllm", "org/model", "--max-model-len", "4096", "--enable-prefix-caching", "--dry-run",
                "--json", "--", "--seed", "7"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["argv"][out["argv"].index("serve") + 1] == "org/model"
    assert "--enable-prefix-caching" in out["argv"] and out["argv"][-2:] == ["--seed", "7"]
    assert out["env"]["VLLM_API_KEY"] == "<generated>"


def test_cli_serve_rejects_a_bad_port(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["serve", "vllm", "org/model", "--port", "99999"]) == 2
    assert "--port" in capsys.readouterr().err


@pytest.mark.skipif(os.environ.get("CUDA_VISIBLE_DEVICES") is not None, reason="a GPU machine may have vLLM")
def test_cli_vllm_without_vllm_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    from agentflow.serving.vllm import vllm_available

    if vllm_available() is None:
        pytest.skip("vLLM and a GPU are present here")
    assert run(["serve", "vllm", "org/model"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "vLLM" in err[0]


def test_sampling_params_from_request() -> None:
    req = ChatRequest(messages=[Message.user("x")], n=4, temperature=0.8, seed=3, max_tokens=64, stop=["\n"])
    assert sampling_kwargs(req) == {"n": 4, "temperature": 0.8, "seed": 3, "max_tokens": 64, "stop": ["\n"]}


# --- metrics -------------------------------------------------------------------------------------------
VLLM_METRICS = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 200.0
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 50.0
vllm:iteration_tokens_total_bucket{le="1.0",model_name="m"} 3.0
"""


def test_vllm_metrics_summary() -> None:
    s = summarize("vllm", VLLM_METRICS)
    assert s["requests_running"] == 3 and s["requests_waiting"] == 2
    assert s["kv_cache_usage"] == 0.25
    assert s["prefix_cache_hit_rate"] == 0.25


def test_vllm_v0_metric_names_are_understood() -> None:
    text = "vllm:gpu_cache_usage_perc{model_name=\"m\"} 0.5\nvllm:gpu_prefix_cache_hit_rate{model_name=\"m\"} 0.75\n"
    s = summarize("vllm", text)
    assert s["kv_cache_usage"] == 0.5 and s["prefix_cache_hit_rate"] == 0.75
    assert s["requests_running"] is None


def test_prometheus_parser_sums_label_sets_and_skips_comments() -> None:
    values = parse_prometheus("# c\na{x=\"1\"} 1\na{x=\"2\"} 2.5\nb 4\nc_bucket{le=\"1\"} 9\nbad line\n")
    assert values == {"a": 3.5, "b": 4.0}


# --- --serve flag ----------------------------------------------------------------------------------------
def test_parse_serve_flag() -> None:
    assert parse_serve_flag("vllm:Qwen/Q-7B,max_model_len=8192,gpu_memory_utilization=0.8") == (
        "vllm", {"model": "Qwen/Q-7B", "max_model_len": 8192, "gpu_memory_utilization": 0.8})
    assert parse_serve_flag("llamacpp") == ("llamacpp", {"model": "gemma3-270m"})
    assert parse_serve_flag("local:qwen2.5-coder-1.5b") == ("llamacpp", {"model": "qwen2.5-coder-1.5b"})
    for bad in ("tgi:m", "vllm:", "vllm:m,oops"):
        with pytest.raises(UserError):
            parse_serve_flag(bad)


# --- completion template ---------------------------------------------------------------------------------
def test_few_shot_template_renders_examples_and_turns() -> None:
    tpl = FewShotTemplate(examples=[("2+2?", "4")])
    text = tpl.render([Message.system("Be brief."), Message.user("3+3?"), Message.assistant("6"),
                       Message.user("1+1?")])
    assert text.startswith("Be brief.")
    assert text.index("Question: 2+2?") < text.index("Answer: 4") < text.index("Question: 3+3?")
    assert text.endswith("Question: 1+1?\n\nAnswer:")


# --- local model options ------------------------------------------------------------------------------------
def test_local_model_rejects_unknown_names_and_options() -> None:
    from agentflow.models.backends.local import load_local_model

    with pytest.raises(UserError, match="gemma3-270m"):
        load_local_model("llama-9000")
    with pytest.raises(ConfigError):
        load_local_model("gemma3-270m", parallel=0)
    with pytest.raises(UserError, match="api_key"):
        load_local_model("gemma3-270m", api_key="x" * 10)


# --- ports and processes -------------------------------------------------------------------------------------
def test_port_helpers() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        taken = sock.getsockname()[1]
        assert not port_is_free(taken)
    assert port_is_free(pick_free_port())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


SPAWNER = ("import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']);"
           " print(c.pid, flush=True); time.sleep(60)")


def _child_pid(log: Path) -> int:
    for _ in range(100):
        text = log.read_text() if log.exists() else ""
        if text.strip():
            return int(text.split()[0])
        time.sleep(0.05)
    raise AssertionError("child pid never printed")


def test_stop_kills_the_whole_process_group(tmp_path: Path) -> None:
    proc = ManagedProcess([sys.executable, "-c", SPAWNER], log_path=tmp_path / "p.log", label="t")
    proc.start()
    child = _child_pid(tmp_path / "p.log")
    assert proc.pidfile is not None and proc.pidfile.exists()
    proc.stop(timeout=5)
    time.sleep(0.2)
    assert not _alive(proc.pid or 0) and not _alive(child)
    assert not proc.pidfile.exists()


def test_reap_orphans_kills_servers_whose_owner_died(tmp_path: Path) -> None:
    # start a process the way a now-dead owner would have left it: own session, pidfile naming a dead owner
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    dead_owner = subprocess.Popen([sys.executable, "-c", "pass"])
    dead_owner.wait()
    pidfile = run_dir() / f"{orphan.pid}.json"
    pidfile.write_text(json.dumps({"pid": orphan.pid, "owner_pid": dead_owner.pid,
                                   "exe": os.path.basename(sys.executable)}))
    try:
        assert orphan.pid in reap_orphans()
        orphan.wait(timeout=5)
        assert not pidfile.exists()
    finally:
        if orphan.poll() is None:
            orphan.kill()


def test_reap_orphans_spares_processes_of_a_live_owner(tmp_path: Path) -> None:
    proc = ManagedProcess([sys.executable, "-c", "import time; time.sleep(60)"], log_path=tmp_path / "l.log")
    proc.start()
    try:
        assert proc.pid not in reap_orphans()
        assert proc.alive
    finally:
        proc.stop()


def test_early_death_is_reported_with_exit_code_and_log_tail(tmp_path: Path) -> None:
    launch = Launch(kind="llamacpp", model="m", label="fake-server",
                    argv=lambda port: [sys.executable, "-c", "print('model file is corrupt'); raise SystemExit(3)"])
    handle = ServerHandle(launch, log_dir=tmp_path)
    with pytest.raises(ServerStartError) as info:
        handle.start_sync()
    assert "exited with code 3 during start-up" in str(info.value)
    assert any("model file is corrupt" in line for line in info.value.log_tail)


def test_startup_timeout_stops_the_process(tmp_path: Path) -> None:
    launch = Launch(kind="llamacpp", model="m", label="mute-server", startup_timeout_s=1.0,
                    argv=lambda port: [sys.executable, "-c", "import time; time.sleep(60)"])
    handle = ServerHandle(launch, log_dir=tmp_path)
    with pytest.raises(ServerStartError, match="did not become healthy within 1s"):
        handle.start_sync()
    assert handle.pid is not None and not _alive(handle.pid)


def test_handle_api_key_is_redacted_from_events() -> None:
    launch = Launch(kind="llamacpp", model="m", argv=lambda port: ["true"])
    handle = ServerHandle(launch)
    log = EventLog()
    event = log.write(ServerMetrics(server="llamacpp", model="m", error=f"refused key={handle.api_key}"))
    assert isinstance(event, ServerMetrics) and event.error is not None and handle.api_key not in event.error


def test_profiles_tell_agents_what_works() -> None:
    from agentflow.serving.embedded import embedded_model

    small, default = embedded_model("gemma3-270m").profile, embedded_model("qwen2.5-coder-1.5b").profile
    assert small.mode == "completion" and not small.tool_calling
    assert default.mode == "chat" and not default.tool_calling and default.guided_json
