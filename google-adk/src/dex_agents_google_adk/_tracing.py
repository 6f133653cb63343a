"""Dex's spans without ADK's own: a tracer provider that gives ADK's instrumentation no spans.

ADK traces every invocation with its own OpenTelemetry spans (instrumentation scope ``gcp.vertex.agent``).
Inside a durable session they describe each Step's private ADK run, not the session: a model Step shows
`execute_tool` spans for calls that only the gate answered (no tool ran), and ADK's model and tool spans
repeat the session's ``chat`` and ``execute_tool`` spans. ADK has no switch for its spans, so
`without_adk_spans` wraps the application's tracer provider: ADK's tracer gets spans that record nothing
and stand for their parent, so anything started inside them (an HTTP client's span, say) still joins the
activation's trace instead of losing its parent.
"""

from __future__ import annotations

from collections.abc import Iterator

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.util import types

# The API's own Tracers use it, so the stand-in also works as a decorator of async functions.
from opentelemetry.util._decorator import _agnosticcontextmanager  # pyright: ignore[reportPrivateUsage]

__all__ = ["ADK_INSTRUMENTATION_SCOPE", "without_adk_spans"]

ADK_INSTRUMENTATION_SCOPE = "gcp.vertex.agent"
"""The instrumentation scope of every span ADK emits."""


class _StandInTracer(trace.Tracer):
    """Starts no span: each "span" is the current one's context, recording nothing."""

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: trace.SpanKind = trace.SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: trace._Links = None,  # pyright: ignore[reportPrivateUsage]
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> trace.Span:
        del name, kind, attributes, links, start_time, record_exception, set_status_on_exception
        return trace.NonRecordingSpan(trace.get_current_span(context).get_span_context())

    @_agnosticcontextmanager
    def start_as_current_span(
        self,
        name: str,
        context: Context | None = None,
        kind: trace.SpanKind = trace.SpanKind.INTERNAL,
        attributes: types.Attributes = None,
        links: trace._Links = None,  # pyright: ignore[reportPrivateUsage]
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[trace.Span]:
        span = self.start_span(name, context)
        with trace.use_span(span, end_on_exit=end_on_exit) as current:
            yield current


class _WithoutAdkSpans(trace.TracerProvider):
    def __init__(self, provider: trace.TracerProvider) -> None:
        self._provider = provider
        self._stand_in = _StandInTracer()

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: types.Attributes | None = None,
    ) -> trace.Tracer:
        if instrumenting_module_name == ADK_INSTRUMENTATION_SCOPE:
            return self._stand_in
        return self._provider.get_tracer(
            instrumenting_module_name, instrumenting_library_version, schema_url, attributes
        )


def without_adk_spans(provider: trace.TracerProvider) -> trace.TracerProvider:
    """Return a tracer provider that is ``provider`` for every tracer except ADK's, which emits no spans.

    Install the result as the global provider in the Worker (``trace.set_tracer_provider``); keep
    ``provider`` itself to shut it down. The session's spans (`dex_agents.otel`) and every other library's
    come from ``provider`` as before.

    Args:
        provider: The application's tracer provider, such as an OpenTelemetry SDK `TracerProvider`.

    Returns:
        The wrapping provider.
    """
    return _WithoutAdkSpans(provider)
