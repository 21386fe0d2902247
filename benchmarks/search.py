"""Parallel branches of a graph search: prints ONE JSON object.

A workflow's search node (best_of_n) over a subgraph of `--steps` function nodes, each one model call (the
run's deps are the model), run as a real run (checkpoints and events in a run folder), against a real model
server process on loopback (an OpenAI-compatible chat server that answers every request after a fixed
latency), called through agentflow's `openai-compatible` backend: wall time of a search of one branch, of 16
branches at concurrency 16 and of 16 one after another. Target: parallel16_s / one_rollout_s <= 1.15. The
OpenAI SDK costs a few ms of CPU per call, which on a small machine is not small next to a short latency, so
the same searches are also timed through a bare httpx client (`httpx_*` keys): that isolates what the search
itself adds. The engine's own time per expansion beside its nodes: benchmarks/graph_search.py.

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
from typing import Any, TypedDict

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


class State(TypedDict, total=False):
    task: str
    calls: int
    report: dict[str, Any]


async def step(state: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """One step of a branch: one model call (the run's deps are the model), its reply appended to the task."""
    from agentflow.models.base import ChatRequest, Message

    reply = await ctx.deps.chat(ChatRequest(messages=[Message.user(state.get("task") or "count")]))
    return {"calls": int(state.get("calls") or 0) + 1, "task": f"{state.get('task')} {reply.choices[0].message.content}"}


def workflow(n: int, concurrency: int, steps: int) -> Any:
    """A search node running `n` branches (`concurrency` at once) of a subgraph of `steps` model-calling steps."""
    from agentflow.graph import END, Workflow

    branch = Workflow("rollout", state=State)
    for k in range(steps):
        branch.node(f"s{k}", step, writes=["calls", "task"])
        branch.edge(f"s{k}", f"s{k + 1}" if k + 1 < steps else END)
    return Workflow("bench", state=State).search("search", branch, strategy="best_of_n", n=n,
                                                   concurrency=concurrency, value="calls", output="report").edge("search", END).spec


async def rollouts(latency: float, steps: int, client: str, tmp: Path) -> dict[str, float]:
    from agentflow.graph import WorkflowRunner
    from agentflow.models.spec import load_model

    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(latency)], stdout=subprocess.PIPE, text=True
    )
    runs = [0]
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().split()[1])
        base_url = f"http://127.0.0.1:{port}/v1"
        if client == "agentflow":
            model: Any = load_model(f"openai-compatible:{base_url}#sim", concurrency=16)
        else:
            model = HttpxModel(base_url)

        async def timed(n: int, concurrency: int) -> float:
            runs[0] += 1
            start = time.perf_counter()
            async with WorkflowRunner(workflow(n, concurrency, steps), run_dir=tmp / f"{client}-{runs[0]}",
                                      deps=model, sandbox="none") as runner:
                result = await runner.start({"task": "count", "calls": 0})
            elapsed = time.perf_counter() - start
            report = result.state["report"]
            assert result.status == "done" and len(report["branches"]) == n, result.status
            assert all(b["value"] == steps for b in report["branches"]), report["branches"]
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


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--serve", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--latency", type=float, default=1.0, help="server latency per request, seconds")
    parser.add_argument("--steps", type=int, default=2, help="model calls per rollout")
    args = parser.parse_args()
    if args.serve is not None:
        await _serve(args.serve)
        return
    figures: dict[str, Any] = {"latency_s": args.latency, "steps_per_rollout": args.steps}
    with tempfile.TemporaryDirectory() as tmp:
        figures.update(await rollouts(args.latency, args.steps, "agentflow", Path(tmp)))
        figures.update(await rollouts(args.latency, args.steps, "httpx", Path(tmp)))
    figures["targets"] = {"parallel_efficiency_ratio": 1.15}
    figures["cpus"] = os.cpu_count()
    print(json.dumps(figures))


if __name__ == "__main__":
    asyncio.run(main())
