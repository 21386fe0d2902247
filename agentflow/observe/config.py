"""`TraceConfig`: where a run's spans go and what they may contain (`-c trace.endpoint=...`)."""

from __future__ import annotations

from pydantic import field_validator

from agentflow.config import StrictConfig


class TraceConfig(StrictConfig):
    """OpenTelemetry tracing of a run. Nothing is sent unless an endpoint is set here or in the environment."""

    endpoint: str | None = None
    """OTLP/HTTP collector base URL (e.g. http://127.0.0.1:4318); when unset, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
    or `OTEL_EXPORTER_OTLP_ENDPOINT` is used, and with neither no exporter is created."""
    content: bool = False
    """Record message contents and tool arguments/results in the events, the spans and the viewer (opt-in; also
    turned on by `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`)."""
    service_name: str = "agentflow"
    """`service.name` of the exported spans (`OTEL_SERVICE_NAME` wins when set)."""

    @field_validator("endpoint")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL; give the collector's OTLP/HTTP base URL, "
                             "e.g. http://127.0.0.1:4318")
        return value
