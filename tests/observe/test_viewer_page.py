"""The page `agentflow view` writes stays whole whatever the run holds, and runs under a Content-Security-Policy
that allows only its own inline script and style (by hash): run content that spells a template placeholder
(`/*{{JS}}*/`, `{{DATA}}`, ...) is shown as text, never expanded, and a script or style attribute injected
later is refused by the browser."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from html.parser import HTMLParser
from importlib import resources
from pathlib import Path
from typing import Any

from agentflow.cli.main import run
from agentflow.observe.view import load_run

from .conftest import console_errors
from .synthetic import write_synthetic_run
from .test_viewer import open_view

OLD_PLACEHOLDERS = ["{{TITLE}}", "/*{{CSS}}*/", "{{DATA}}", "/*{{JS}}*/"]


def placeholders() -> list[str]:
    """Every placeholder the template has now, and those it had when the bug was found."""
    template = resources.files("agentflow.observe").joinpath("assets", "viewer.html").read_text(encoding="utf-8")
    found = re.findall(r"/\*\{\{[A-Z_]+\}\}\*/|\{\{[A-Z_]+\}\}", template)
    return sorted(set(found + OLD_PLACEHOLDERS))


def placeholder_run(tmp_path: Path) -> tuple[Path, str]:
    """A one-task run whose folder name, candidate patch, submitted patch and event data spell every placeholder."""
    evil = " ".join(placeholders())
    name_safe = " ".join(p for p in placeholders() if "/" not in p)  # a folder name holds no '/'
    run_dir = write_synthetic_run(tmp_path / f"run {name_safe}", tasks=1, nodes_per_task=3)
    cands = [json.loads(line) for line in (run_dir / "candidates.jsonl").read_text().splitlines()]
    for c in cands:
        c["patch"] += f"+# {evil}\n"
    (run_dir / "candidates.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cands))
    preds = [json.loads(line) for line in (run_dir / "preds.jsonl").read_text().splitlines()]
    preds[0]["model_patch"] += f"+# {evil}\n"
    (run_dir / "preds.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    for e in events:
        if e["kind"] == "model.call":
            e["data"]["finish_reasons"] = [evil]
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return run_dir, evil


class _Page(HTMLParser):
    """The parts of the page that matter: title, CSP, and the text of each <style> and <script>."""

    def __init__(self) -> None:
        super().__init__()
        self.title = ""
        self.csp: list[str] = []
        self.styles: list[str] = []
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "meta" and (a.get("http-equiv") or "").lower() == "content-security-policy":
            self.csp.append(a.get("content") or "")
        if tag in ("title", "style", "script"):
            self._in = tag
            if tag == "style":
                self.styles.append("")
            elif tag == "script":
                self.scripts.append((a, ""))

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "title":
            self.title += data
        elif self._in == "style":
            self.styles[-1] += data
        elif self._in == "script":
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def _view(run_dir: Path) -> _Page:
    """The page the CLI writes for `run_dir`, parsed."""
    assert run(["view", str(run_dir)]) == 0
    page = _Page()
    page.feed((run_dir / "view.html").read_text(encoding="utf-8"))
    page.close()
    return page


def _asset(name: str) -> str:
    return resources.files("agentflow.observe").joinpath("assets", name).read_text(encoding="utf-8")


def test_run_content_spelling_the_template_placeholders_leaves_the_page_whole(tmp_path: Path) -> None:
    run_dir, evil = placeholder_run(tmp_path)
    page = _view(run_dir)
    assert page.title == f"agentflow repair: {run_dir.name}"
    assert [s.strip() for s in page.styles] == [_asset("viewer.css").strip()]
    (data_attrs, data_text), (code_attrs, code_text) = page.scripts  # the run's data, then the code: nothing else
    assert data_attrs.get("type") == "application/json" and code_attrs.get("type") is None
    assert code_text.strip() == _asset("viewer.js").strip()
    embedded = json.loads(data_text)
    expected = json.loads(json.dumps(load_run(run_dir), default=str))
    assert {k: v for k, v in embedded.items() if k != "generated"} == \
        {k: v for k, v in expected.items() if k != "generated"}
    assert evil in embedded["preds"]["synth__pkg-0"] and evil in data_text


def test_the_csp_allows_exactly_the_pages_own_inline_script_and_style(tmp_path: Path) -> None:
    run_dir, _ = placeholder_run(tmp_path)
    page = _view(run_dir)
    (csp,) = page.csp
    directives = {d.split()[0]: d.split()[1:] for d in csp.split(";") if d.strip()}
    assert "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp
    assert directives["default-src"] == ["'none'"]
    code = page.scripts[1][1]
    assert directives["script-src"] == [_sha256(code)]  # the data block is not code: it needs no hash
    assert directives["style-src"] == [_sha256(page.styles[0])]


def test_run_content_spelling_the_placeholders_renders_whole_in_chromium(browser: Any, tmp_path: Path) -> None:
    run_dir, evil = placeholder_run(tmp_path)
    open_view(browser, run_dir)  # fails ("never finished rendering") when the page's data or code was mangled
    assert browser.title == f"agentflow repair: {run_dir.name}"
    browser.find_element("css selector", "#search-tree > .snode > .srow").click()
    browser.find_element("css selector", "#search-tree .kids .snode .srow").click()
    assert evil in browser.find_element("css selector", ".sdetail .patch").text
    assert evil in browser.find_element("css selector", "main").text  # the submitted patch, too
    assert console_errors(browser) == []


def test_the_page_works_under_its_csp_and_the_csp_refuses_injected_inline_code(browser: Any, tmp_path: Path) -> None:
    run_dir = write_synthetic_run(tmp_path / "csp", tasks=1, nodes_per_task=5)
    open_view(browser, run_dir)
    log = browser.get_log("browser")
    assert [e for e in log if "Content Security Policy" in e.get("message", "")] == [], log
    assert [e for e in log if e.get("level") == "SEVERE"] == []
    # the stylesheet applies, and so do the positions the script gives the timeline's bars
    assert browser.find_element("css selector", "header .brand").value_of_css_property("font-weight") == "700"
    widths = browser.execute_script("return [...document.querySelectorAll('.tl-bar')].map((b) => b.style.width)")
    assert widths and all(w.endswith("%") for w in widths)
    assert browser.execute_script("return document.querySelector('.tl-bar').getBoundingClientRect().width") > 100
    # an inline script or style attribute that was not in the page as written is refused
    injected = browser.execute_script(
        "const s = document.createElement('script'); s.textContent = 'window.injected = 1';"
        "document.body.appendChild(s);"
        "const d = document.createElement('div'); d.setAttribute('style', 'width: 321px'); document.body.appendChild(d);"
        "return [window.injected === undefined, d.getBoundingClientRect().width !== 321];")
    assert injected == [True, True]
    refused = [e for e in browser.get_log("browser") if "Content Security Policy" in e.get("message", "")]
    assert len(refused) >= 2, refused
