"""Observability: OpenTelemetry GenAI spans derived from a run's events, and the run viewer (`agentflow view`).

Layer 2: imports only the foundations (events, config, errors, secrets). `opentelemetry-api` is imported when a
run is instrumented, never by `import agentflow`; the SDK and the OTLP exporter (extra `otel`) only when an
endpoint is configured.
"""

from __future__ import annotations

from agentflow.observe.config import TraceConfig
from agentflow.observe.tracing import instrument

__all__ = ["TraceConfig", "instrument"]
