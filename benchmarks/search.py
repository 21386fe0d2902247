"""Search benchmark: prints ONE JSON object.

- Parallel rollouts against a real model server process on loopback (an OpenAI-compatible chat server that
  answers every request after a fixed latency), called through agentflow's `openai-compatible` backend:
  wall time of one rollout, of 16 rollouts at concurrency 16 and of 16 one after another.
  Target: parallel16_s / one_rollout_s <= 1.15. The OpenAI SDK costs a few ms of CPU per call, which on a
  small machine is not small next to a short latency, so the same rollouts are also timed through a bare
  httpx client (`httpx_*` keys): that isolates what the search itself adds.
- Search bookkeeping per tree node (MCTS with a zero-latency simulated policy and verifier, their time
  subtracted; events recorded to a JSONL file). Target: <= 200 microseconds.

    .venv/bin/python benchmarks/search.py [--latency 0.1] [--steps 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# --- the model server (run as a subprocess: `search.py --serve LATENCY`) -------------------------------------


async def _serve(latency: float) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = json.loads(await reader.readexactly(length)) if length else {}
                await asyncio.sleep(latency)
                n = int(body.get("n") or 1)
                reply = {
                    "id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "sim"),
                    "choices": [{"index": i, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": f"step {len(body.get('messages', []))}"}}
                                for i in range(n)],
                    "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
                }
                data = json.dumps(reply).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(data)).encode() + b"\r\n\r\n" + data)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=256)
    print(f"PORT {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


# --- the benchmark --------------------------------------------------------------------------------------------


class HttpxModel:
    """The thinnest possible ChatModel over httpx: separates the search's scaling from the SDK's CPU cost."""

    def __init__(self, base_url: str) -> None:
        import httpx

        self.spec = f"httpx:{base_url}"
        self.base_url = base_url
        self.client = httpx.AsyncClient(limits=httpx.Limits(max_connections=64), timeout=60)

    async def chat(self, request: Any) -> Any:
        from agentflow.models.base import ChatResponse, Choice, Message, Usage

        body = {"model": "sim", "n": request.n,
                "messages": [{"role": m.role, "content": m.content} for m in request.messages]}
        raw = (await self.client.post(f"{self.base_url}/chat/completions", json=body)).json()
        return ChatResponse(
            choices=[Choice(message=Message.assistant(c["message"]["content"])) for c in raw["choices"]],
            usage=Usage(input_tokens=raw["usage"]["prompt_tokens"], output_tokens=raw["usage"]["completion_tokens"]),
        )

    def stream(self, request: Any) -> Any:  # pragma: no cover - not used here
        raise NotImplementedError

    async def aclose(self) -> None:
        await self.client.aclose()


async def rollouts(latency: float, steps: int, client: str) -> dict[str, float]:
    from agentflow.models.spec import load_model
    from agentflow.search import BestOfN, ChatPolicy

    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(latency)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        base_url = f"http://127.0.0.1:{port}/v1"
        if client == "agentflow":
            model: Any = load_model(f"openai-compatible:{base_url}#sim", concurrency=16)
        else:
            model = HttpxModel(base_url)
        policy = ChatPolicy(model, task="count", max_steps=steps)

        async def timed(n: int, concurrency: int) -> float:
            start = time.perf_counter()
            result = await BestOfN(policy, None, n=n, concurrency=concurrency).run()
            elapsed = time.perf_counter() - start
            assert len(result.candidates) == n and all(c.usage.model_calls == steps for c in result.candidates)
            return elapsed

        await timed(16, 16)  # warm-up: connections, imports
        one = min([await timed(1, 1) for _ in range(3)])
        parallel = min([await timed(16, 16) for _ in range(3)])
        sequential = await timed(16, 1) if client == "agentflow" else None
        await model.aclose()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    if client != "agentflow":
        return {"httpx_one_rollout_s": round(one, 4), "httpx_parallel16_s": round(parallel, 4),
                "httpx_parallel_efficiency_ratio": round(parallel / one, 4)}
    assert sequential is not None
    return {"one_rollout_s": round(one, 4), "parallel16_s": round(parallel, 4),
            "sequential16_s": round(sequential, 4), "parallel_efficiency_ratio": round(parallel / one, 4)}


async def overhead(expansions: int, events_path: Path) -> dict[str, Any]:
    from agentflow.events import EventLog
    from agentflow.search import MCTS, RolloutContext, SimulatedPolicy, Verification
    from agentflow.search.types import Action, Candidate, NodeState
    from agentflow.search.verifiers import FunctionVerifier

    spent = [0.0]

    class TimedPolicy(SimulatedPolicy):
        async def propose(self, state: NodeState, k: int, ctx: RolloutContext) -> list[Action]:
            t = time.perf_counter()
            out = await super().propose(state, k, ctx)
            spent[0] += time.perf_counter() - t
            return out

        async def apply(self, state: NodeState, action: Action, ctx: RolloutContext) -> NodeState:
            t = time.perf_counter()
            out = await super().apply(state, action, ctx)
            spent[0] += time.perf_counter() - t
            return out

    policy = TimedPolicy(steps=30, p=0.5, options=3)  # a realistic depth: 30 steps

    def value(cand: Candidate) -> Verification:
        t = time.perf_counter()
        v = Verification(score=policy.progress(cand.state))
        spent[0] += time.perf_counter() - t
        return v

    verifier = FunctionVerifier(value)
    with EventLog(events_path, run_id="bench") as log:
        start = time.perf_counter()
        result = await MCTS(policy, verifier, k=4, concurrency=8, max_depth=30, stop_on_solution=False,
                            max_expansions=expansions).run(events=log)
        total = time.perf_counter() - start
    nodes = len(result.tree)
    return {"overhead_us_per_node": round((total - spent[0]) / nodes * 1e6, 2), "overhead_nodes": nodes,
            "overhead_events": len(events_path.read_text().splitlines())}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--latency", type=float, default=1.0, help="server latency per request, seconds")
    parser.add_argument("--steps", type=int, default=2, help="model calls per rollout")
    parser.add_argument("--expansions", type=int, default=2000, help="MCTS expansions for the overhead figure")
    args = parser.parse_args()
    if args.serve is not None:
        await _serve(args.serve)
        return
    figures: dict[str, Any] = {"latency_s": args.latency, "steps_per_rollout": args.steps}
    figures.update(await rollouts(args.latency, args.steps, "agentflow"))
    figures.update(await rollouts(args.latency, args.steps, "httpx"))
    with tempfile.TemporaryDirectory() as tmp:
        figures.update(await overhead(args.expansions, Path(tmp) / "events.jsonl"))
    figures["targets"] = {"parallel_efficiency_ratio": 1.15, "overhead_us_per_node": 200}
    figures["cpus"] = os.cpu_count()
    print(json.dumps(figures))


if __name__ == "__main__":
    asyncio.run(main())
