"""Cold `import agentflow` time: median over several fresh interpreter processes.

Prints one JSON object: {"import_s": median seconds spent in `import agentflow` itself, "process_s": median
wall time of the whole `python -c "import agentflow"` process, "bare_process_s": the same for `python -c pass`,
"runs": n, "heavy_modules_loaded": [...]}.
The goal is import_s < 0.5 with no provider SDK, LangGraph or Docker client imported.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

RUNS = 7
HEAVY = ("openai", "anthropic", "langgraph", "litellm", "docker", "networkx", "vllm")
PROBE = (
    "import sys, time\n"
    "t = time.perf_counter()\n"
    "import agentflow\n"
    "dt = time.perf_counter() - t\n"
    f"print(dt, ','.join(m for m in {HEAVY!r} if m in sys.modules))\n"
)


def main() -> None:
    times: list[float] = []
    heavy: set[str] = set()
    for _ in range(RUNS):
        out = subprocess.run(
            [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True
        ).stdout.split()
        times.append(float(out[0]))
        if len(out) > 1:
            heavy.update(out[1].split(","))
    print(
        json.dumps(
            {
                "import_s": round(statistics.median(times), 4),
                "process_s": round(_process_time("import agentflow"), 4),
                "bare_process_s": round(_process_time("pass"), 4),
                "runs": RUNS,
                "heavy_modules_loaded": sorted(heavy),
            }
        )
    )


def _process_time(code: str) -> float:
    walls = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        walls.append(time.perf_counter() - start)
    return statistics.median(walls)


if __name__ == "__main__":
    main()
