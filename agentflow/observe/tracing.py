"""Attach tracing to a run's event log: the OTLP exporter when an endpoint is configured, else an application's
own tracer provider when it installed one, else nothing (no exporter, no connection, no cost)."""

from __future__ import annotations

import os
from typing import Any

from agentflow.errors import UserError
from agentflow.events import EventLog
from agentflow.observe.config import TraceConfig

_ENDPOINT_ENV = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def configured_endpoint(config: TraceConfig) -> str | None:
    """The collector this run sends to: the config key, else the standard environment variables, else None."""
    return config.endpoint or next((os.environ[k] for k in _ENDPOINT_ENV if os.environ.get(k)), None)


def capture_content(config: TraceConfig) -> bool:
    return config.content or os.environ.get(_CONTENT_ENV, "").strip().lower() in ("1", "true", "yes")


def otlp_provider(config: TraceConfig, endpoint: str) -> Any:
    """A TracerProvider of our own (not the global one) exporting over OTLP/HTTP with a batch processor."""
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise UserError(
            f"tracing to {endpoint} needs the OpenTelemetry SDK and OTLP exporter",
            hint="pip install 'agentflow[otel]', or unset OTEL_EXPORTER_OTLP_ENDPOINT / trace.endpoint",
        ) from None
    if config.endpoint:
        url = config.endpoint.rstrip("/")
        exporter = OTLPSpanExporter(endpoint=url if url.endswith("/v1/traces") else url + "/v1/traces")
    else:  # the exporter reads the standard variables itself (traces endpoint, base + /v1/traces, headers)
        exporter = OTLPSpanExporter()
    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or config.service_name})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def _app_provider() -> Any:
    """The tracer provider an application installed globally, or None while it is the API's no-op default."""
    from opentelemetry import trace

    provider = trace.get_tracer_provider()
    return None if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider) else provider


def instrument(events: EventLog, config: TraceConfig | None = None, *, provider: Any = None) -> Any:
    """Make `events` the source of this run's trace: returns the `SpanTranslator` sink, or None when nothing is
    traced. `provider` (an SDK TracerProvider, e.g. with an in-memory exporter) beats the configuration.
    Spans are made in batches: they are all out once `events.close()` has returned (it flushes and, for the
    exporter made here, shuts the provider down)."""
    config = config or TraceConfig()
    content = capture_content(config)
    events.capture_content = content
    owned = False
    if provider is None:
        endpoint = configured_endpoint(config)
        if endpoint is not None:
            provider, owned = otlp_provider(config, endpoint), True
        else:
            provider = _app_provider()
    if provider is None:
        return None
    from agentflow.observe.spans import SpanTranslator

    on_close = provider.shutdown if owned else getattr(provider, "force_flush", None)
    translator = SpanTranslator(provider.get_tracer("agentflow"), capture_content=content, on_close=on_close)
    events.sinks.append(translator)
    return translator
