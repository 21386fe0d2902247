"""The run viewer on large runs: build time of `agentflow view` and time to a usable page in headless Chromium.
Prints ONE JSON object.

Two synthetic run directories written the way runs write them (tests/observe/synthetic.py, seeded: each task's
repair workflow with a graph search node, its branches' graph nodes tagged): a 200-task bench (8 branches, so 8
candidates, per task) and one MCTS repair with a 500-node tree. For each: `build_s` (reading the run and
writing the page), `html_bytes`, and, opened from disk in Debian's headless Chromium (chromium-driver),
`open_s` measured here from `driver.get` to the page's "ready" mark (best of 3), `ready_ms` the page's own
performance.now() at that mark. Goal: open_s < 2 for both.

Run: .venv/bin/python benchmarks/viewer.py   (needs `make setup-browser`: apt chromium chromium-driver)
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the synthetic runs are the tests' own generator

REPEATS = 3


def browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def open_seconds(driver: Any, page: Path) -> tuple[float, float]:
    """Best-of-REPEATS seconds from navigation to the page's ready mark, and the page's own ms at that mark."""
    best, ready_ms = float("inf"), 0.0
    for _ in range(REPEATS):
        driver.get("about:blank")
        start = time.perf_counter()
        driver.get(page.as_uri())  # returns after the load event: the inline script has run by then
        while driver.execute_script("return document.body && document.body.getAttribute('data-ready')") != "1":
            time.sleep(0.005)
        elapsed = time.perf_counter() - start
        if elapsed < best:
            best, ready_ms = elapsed, float(driver.execute_script("return window.agentflowViewReadyMs"))
    return best, ready_ms


def main() -> None:
    from agentflow.observe.view import write_view
    from tests.observe.synthetic import write_synthetic_run

    result: dict[str, Any] = {}
    driver = browser()
    try:
        with tempfile.TemporaryDirectory() as d:
            for name, tasks, nodes in (("bench200", 200, 9), ("mcts500", 1, 500)):
                run_dir = write_synthetic_run(Path(d) / name, tasks=tasks, nodes_per_task=nodes)
                start = time.perf_counter()
                page = write_view(run_dir)
                result[f"{name}_build_s"] = time.perf_counter() - start
                result[f"{name}_html_bytes"] = page.stat().st_size
                result[f"{name}_open_s"], result[f"{name}_ready_ms"] = open_seconds(driver, page.resolve())
    finally:
        driver.quit()
    result["goal_open_s"] = 2.0
    print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in result.items()}))


if __name__ == "__main__":
    main()
