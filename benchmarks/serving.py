"""Local serving figures, printed as ONE JSON object: `.venv/bin/python benchmarks/serving.py`.

- server_start_s: spawn-to-healthy time of llama-server with the small model (files already set up).
- ttft_ms: time to the first streamed token of a short completion on the small model (median of 5).
- <model>_tokens_per_s_sequential: 8 samples of MAX_TOKENS tokens, one request after another.
- <model>_tokens_per_s_parallel8: the same 8 samples as one `n=8` call of the `local:` model (llama-server's
  own `n`: the prompt is evaluated once, then the server's 8 slots decode the samples together).
- *_parallel_speedup: parallel / sequential (targets: small >= 2, default >= 1.3).
- <model>_server_cpu_ms_per_token_{sequential,parallel8}: llama-server CPU time per generated token in each
  mode. Batching pays only when the parallel figure is lower; it is steadier than tokens/s on a shared machine.
- default_8_samples_fresh_prompt_s_{shared,separate}: wall time of 8 samples of a prompt the server has not
  seen (default_prompt_tokens long, like a repair prompt): one `n=8` request, which evaluates the prompt
  once, against 8 concurrent single requests, which evaluate it 8 times; default_prompt_sharing_speedup
  is separate / shared. This is where best-of-N saves on a CPU.

Measured on 2 AVX2 cores (threads=1 for the CPU figures): Qwen costs ~90 ms CPU per token one-by-one and
~98 ms decoded 8 together: its Q4_K/Q6_K matrix products are compute-bound on this CPU, so batching the
decoding saves nothing (Gemma's per-token overheads do amortize: 24 -> 15 ms). In the throughput figures
the prompt is not the cost: it is short, and llama-server's prompt cache serves it again to later requests.
Neither `--kv-unified` (0.78x), `-fa off` (0.87x) nor `--no-repack` (0.70x) helps. On 2 AVX-512 cores with the
AVX-512 build the set-up now makes there (2026-11-22, quiet machine): Qwen 27.1 -> 33.0 tokens/s (1.22x; 73 ->
60 ms CPU per token), Gemma 70.6 -> 150.7 (2.13x), and 8 samples of a fresh 1,388-token prompt in 35.3 s as one
`n=8` request against 146.5 s as 8 requests (4.15x). On 2 cores of a slower Intel Xeon (AVX-512, no VBMI;
2026-11-22, one run): Qwen 11.0 -> 17.5 tokens/s (1.60x; 180 -> 111 ms CPU per token), Gemma 36.1 -> 75.2
(2.08x), the fresh 1,451-token prompt 72.6 s shared against 300.2 s separate (4.14x), server start 2.8 s,
time to first token 71 ms.

`small` is local:gemma3-270m (completion mode), `default` is local:qwen2.5-coder-1.5b (chat mode).
Samples ignore end-of-sequence and the few-shot template's stop strings, so every sample is exactly MAX_TOKENS
long: a batch's wall time is its slowest sample, so unequal lengths would undercount parallel throughput.
Needs `agentflow serve setup`.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from agentflow.models.backends.local import load_local_model
from agentflow.models.base import ChatRequest, Message

SAMPLES = 8
MAX_TOKENS = int(os.environ.get("BENCH_MAX_TOKENS", "64"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))
QUESTION = "Write a short Python function that reverses a string, and explain it."


def _request(n: int, seed: int) -> ChatRequest:
    return ChatRequest(messages=[Message.user(QUESTION)], n=n, seed=seed, temperature=0.8, max_tokens=MAX_TOKENS,
                       extra={"ignore_eos": True})


def _cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of a process so far (Linux /proc), 0.0 where unavailable."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _throughput(model: Any) -> tuple[float, float, float, float]:
    """Best of ROUNDS interleaved (sequential, parallel) rounds: other load on the machine hits both alike.

    Also the server's CPU milliseconds per generated token of each mode (lowest of the rounds): unlike
    tokens/s it barely moves when other processes share the cores, and it shows whether decoding 8 samples
    together costs less CPU per token than decoding them one by one.
    """
    pid = model.server.pid
    await model.chat(_request(1, 0))  # warm-up
    sequential = parallel = 0.0
    cpu_seq = cpu_par = float("inf")
    for r in range(ROUNDS):
        cpu, start = _cpu_seconds(pid), time.perf_counter()
        tokens = 0
        for seed in range(SAMPLES):
            tokens += (await model.chat(_request(1, 1000 * r + seed))).usage.output_tokens
        sequential = max(sequential, tokens / (time.perf_counter() - start))
        cpu_seq = min(cpu_seq, 1000 * (_cpu_seconds(pid) - cpu) / max(tokens, 1))
        cpu, start = _cpu_seconds(pid), time.perf_counter()
        tokens = (await model.chat(_request(SAMPLES, 1000 * r + 100))).usage.output_tokens
        parallel = max(parallel, tokens / (time.perf_counter() - start))
        cpu_par = min(cpu_par, 1000 * (_cpu_seconds(pid) - cpu) / max(tokens, 1))
    return sequential, parallel, cpu_seq, cpu_par


FRESH_PROMPT = (Path(__file__).read_text() * 3)[:5000]
"""About 1,300 tokens of code: the size of a repair prompt."""


async def _fresh_prompt_seconds(model: Any) -> tuple[float, float, int]:
    """(one n=8 request, 8 concurrent requests, prompt tokens) for 8 samples of a prompt not seen before."""

    def request(salt: str, n: int, seed: int) -> ChatRequest:
        text = f"[{salt}] Find a bug in this code and explain it.\n\n{FRESH_PROMPT}"
        return ChatRequest(messages=[Message.user(text)], n=n, seed=seed, temperature=0.8, max_tokens=MAX_TOKENS,
                           extra={"ignore_eos": True})

    start = time.perf_counter()
    reply = await model.chat(request("shared", SAMPLES, 1))
    shared = time.perf_counter() - start
    start = time.perf_counter()
    await asyncio.gather(*(model.chat(request("separate", 1, seed)) for seed in range(SAMPLES)))
    return shared, time.perf_counter() - start, reply.usage.input_tokens


def _ttft_ms(model: Any) -> float:
    handle = model.server
    times = []
    prompt = model.template.render([Message.user(QUESTION)])
    with httpx.Client() as client:
        for i in range(5):
            body = {"model": handle.model, "prompt": prompt, "max_tokens": 8, "stream": True, "seed": i}
            start = time.perf_counter()
            with client.stream("POST", handle.url("/v1/completions"), json=body, headers=handle.headers,
                               timeout=120) as response:
                for line in response.iter_lines():
                    if line.startswith("data: ") and '"text"' in line:
                        times.append((time.perf_counter() - start) * 1000)
                        break
    return statistics.median(times)


async def main() -> None:
    out: dict[str, float] = {}
    for key, name in (("small", "gemma3-270m"), ("default", "qwen2.5-coder-1.5b")):
        model = load_local_model(name, parallel=SAMPLES, ctx=2048, quiet=True, max_attempts=1, timeout_s=1800)
        if hasattr(model, "template"):  # completion mode: no stop strings, see the docstring
            model.template = model.template.model_copy(update={"stop": []})
        try:
            if key == "small":
                out["server_start_s"] = round(model.server.start_seconds or 0.0, 3)  # type: ignore[attr-defined]
                out["ttft_ms"] = round(await asyncio.to_thread(_ttft_ms, model), 1)
            sequential, parallel, cpu_seq, cpu_par = await _throughput(model)
            if key == "default":
                shared, separate, prompt_tokens = await _fresh_prompt_seconds(model)
                out["default_prompt_tokens"] = prompt_tokens
                out["default_8_samples_fresh_prompt_s_shared"] = round(shared, 1)
                out["default_8_samples_fresh_prompt_s_separate"] = round(separate, 1)
                out["default_prompt_sharing_speedup"] = round(separate / shared, 2)
        finally:
            await model.aclose()
        out[f"{key}_tokens_per_s_sequential"] = round(sequential, 1)
        out[f"{key}_tokens_per_s_parallel8"] = round(parallel, 1)
        out[f"{key}_parallel_speedup"] = round(parallel / sequential, 2)
        out[f"{key}_server_cpu_ms_per_token_sequential"] = round(cpu_seq, 1)
        out[f"{key}_server_cpu_ms_per_token_parallel8"] = round(cpu_par, 1)
    out["max_tokens_per_sample"] = MAX_TOKENS
    out["cpu_count"] = os.cpu_count() or 0
    out["rounds"] = ROUNDS
    out["load_avg_1m"] = round(os.getloadavg()[0], 2)  # other work on the machine lowers every figure
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    asyncio.run(main())
