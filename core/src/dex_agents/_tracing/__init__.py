"""Tracing without OpenTelemetry: what the session tells an emitter, and where its Steps call it.

`_spans` holds the spans the session hands over, as plain values, and the `TraceEmitter` protocol;
`_session` is the session's side (`SessionTracing`): which spans exist, under which root, and the
`AgentTraceContext` it keeps. `dex_agents.otel` (the ``otel`` extra) is the OpenTelemetry emitter. Keeping
this package free of OpenTelemetry lets ``import dex_agents`` and a session without tracing run without it.
"""
