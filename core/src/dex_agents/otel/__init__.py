"""OpenTelemetry GenAI tracing of agent sessions: `AgentTracing` for `AgentSessionOptions.tracing`.

It needs the ``otel`` extra, which brings the OpenTelemetry API only: ``pip install "dex-agents[otel]"``.
The application configures the OpenTelemetry SDK and its exporter in the Worker process; without one the
API records nothing. ``import dex_agents`` never imports this package, and a session whose options have no
``tracing`` never loads OpenTelemetry.
"""

# First: raises the ImportError that names the install command when the OpenTelemetry API is missing.
from dex_agents.otel import _api_check  # noqa: F401  # pyright: ignore[reportUnusedImport]
from dex_agents.otel._agent_tracing import CAPTURE_MESSAGE_CONTENT_ENV, AgentTracing
from dex_agents.otel._conventions import GenAIConventions

__all__ = ["CAPTURE_MESSAGE_CONTENT_ENV", "AgentTracing", "GenAIConventions"]
