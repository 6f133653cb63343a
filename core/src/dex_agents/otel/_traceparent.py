"""W3C traceparent text for `AgentTraceContext` and `AgentToolCall.trace_context`."""

from __future__ import annotations

import re

from opentelemetry.trace import SpanContext, TraceFlags

__all__ = ["format_traceparent", "parse_traceparent"]

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


def format_traceparent(span_context: SpanContext) -> str | None:
    """Return ``00-<trace id>-<span id>-<flags>`` for a valid span context, sampled or not, else `None`."""
    if not span_context.is_valid:
        return None
    return f"00-{span_context.trace_id:032x}-{span_context.span_id:016x}-{int(span_context.trace_flags):02x}"


def parse_traceparent(text: str) -> SpanContext | None:
    """Return the remote span context a stored traceparent names, or `None` when it is not a valid one."""
    match = _TRACEPARENT.match(text)
    if match is None:
        return None
    trace_id, span_id, flags = (int(group, 16) for group in match.groups())
    span_context = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags))
    return span_context if span_context.is_valid else None
