"""A real OTLP/HTTP trace receiver on 127.0.0.1 that decodes requests with the OpenTelemetry protobuf
definitions, and headless Chromium (Debian's `chromium` + `chromium-driver`) for the viewer's pages."""

from __future__ import annotations

import gzip
import http.server
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.swe_fixtures import _private_cache, docker_image

__all__ = ["Receiver", "_private_cache", "console_errors", "docker_image"]

CHROMEDRIVER = Path("/usr/bin/chromedriver")


@dataclass
class ReceivedSpan:
    name: str
    span_id: str
    parent_id: str
    trace_id: str
    kind: int
    start_ns: int
    end_ns: int
    status_code: int
    attributes: dict[str, Any]
    events: list[str]
    resource: dict[str, Any]


def _value(v: Any) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


@dataclass
class Receiver:
    url: str
    requests: int = 0
    spans: list[ReceivedSpan] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def by_name(self, prefix: str) -> list[ReceivedSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]

    def parent_of(self, span: ReceivedSpan) -> ReceivedSpan | None:
        return next((s for s in self.spans if s.span_id == span.parent_id), None)

    def children(self, span: ReceivedSpan) -> list[ReceivedSpan]:
        return sorted((s for s in self.spans if s.parent_id == span.span_id), key=lambda s: s.start_ns)


def _handler(receiver: Receiver) -> type[http.server.BaseHTTPRequestHandler]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            receiver.requests += 1
            receiver.paths.append(self.path)
            for rs in request.resource_spans:
                resource = {a.key: _value(a.value) for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for s in ss.spans:
                        receiver.spans.append(ReceivedSpan(
                            name=s.name, span_id=s.span_id.hex(), parent_id=s.parent_span_id.hex(),
                            trace_id=s.trace_id.hex(), kind=s.kind, start_ns=s.start_time_unix_nano,
                            end_ns=s.end_time_unix_nano, status_code=s.status.code,
                            attributes={a.key: _value(a.value) for a in s.attributes},
                            events=[e.name for e in s.events], resource=resource,
                        ))
            out = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: Any) -> None:
            return

    return Handler


@pytest.fixture
def otlp_receiver() -> Iterator[Receiver]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(Receiver("")))
    receiver = Receiver(f"http://127.0.0.1:{server.server_address[1]}")
    server.RequestHandlerClass = _handler(receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield receiver
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium through Debian's chromedriver (skipped, with the reason, where it is not installed)."""
    if not CHROMEDRIVER.exists() or shutil.which("chromium") is None:
        pytest.skip("Debian's chromium and chromium-driver are not installed (make setup-browser)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000",
                "--disable-gpu", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


def console_errors(driver: Any) -> list[dict[str, Any]]:
    """Console messages of level SEVERE since the last call (reading the log empties it)."""
    return [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]
