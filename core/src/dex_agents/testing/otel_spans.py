"""Span files for tracing tests: a Worker child writes its spans as JSON lines, and the test reads them.

A Worker child is another process, so an in-memory exporter cannot hand its spans to the test, and a
SIGKILLed Worker cannot flush a batch. `export_spans_to_file` installs the OpenTelemetry SDK with a
synchronous processor that appends each span to a file the moment it ends, so the file holds exactly the
spans that ended before a kill. It needs the OpenTelemetry SDK (``opentelemetry-sdk``), which the
``testing`` extra does not bring; ``dex_agents.testing`` never imports this module.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

try:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import Sampler
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "dex_agents.testing.otel_spans needs the OpenTelemetry SDK: pip install opentelemetry-sdk"
    ) from error

__all__ = [
    "SPAN_FILE_ENV",
    "ExportedSpan",
    "JsonLinesSpanExporter",
    "export_spans_to_file",
    "read_exported_spans",
]

SPAN_FILE_ENV = "DEX_AGENTS_TEST_SPAN_FILE"
"""The span file a tracing test names for its Worker children."""


class JsonLinesSpanExporter(SpanExporter):
    """Appends each exported span to a file as one JSON line, safe from several threads and processes.

    Args:
        path: The file; created when missing.
    """

    def __init__(self, path: Path | str) -> None:
        self._path = Path(path)
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Append ``spans``, one line each, in one write."""
        text = "".join(json.dumps(_span_json(span), sort_keys=True) + "\n" for span in spans)
        with self._lock, self._path.open("a", encoding="utf-8") as file:
            file.write(text)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release: every export opens and closes the file."""


def _span_json(span: ReadableSpan) -> dict[str, object]:
    context = span.get_span_context()
    assert context is not None
    parent = span.parent
    return {
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_span_id": None if parent is None else f"{parent.span_id:016x}",
        "parent_trace_id": None if parent is None else f"{parent.trace_id:032x}",
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "attributes": {key: _plain(value) for key, value in (span.attributes or {}).items()},
        "links": [
            {"trace_id": f"{link.context.trace_id:032x}", "span_id": f"{link.context.span_id:016x}"}
            for link in span.links
        ],
        "status": span.status.status_code.name,
        "status_description": span.status.description,
        "schema_url": None if span.instrumentation_scope is None else span.instrumentation_scope.schema_url,
    }


def _plain(value: object) -> object:
    if isinstance(value, tuple | list):
        return list(cast(Iterable[object], value))
    return value


@dataclass(frozen=True)
class ExportedSpan:
    """One span from a span file.

    Attributes:
        name: The span's name.
        kind: ``INTERNAL``, ``CLIENT``, ...
        trace_id: 32 hex digits.
        span_id: 16 hex digits.
        parent_span_id: The parent's span ID, `None` for a root.
        parent_trace_id: The parent's trace ID, `None` for a root.
        start_ns: Start time in nanoseconds since the epoch.
        end_ns: End time, `None` when the span never ended.
        attributes: The span's attributes; sequences are lists.
        links: ``(trace_id, span_id)`` of each linked span.
        status: ``UNSET``, ``OK`` or ``ERROR``.
        status_description: The status description.
        schema_url: The instrumentation scope's schema URL, or an empty string.
    """

    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    parent_trace_id: str | None
    start_ns: int
    end_ns: int | None
    attributes: dict[str, object]
    links: tuple[tuple[str, str], ...]
    status: str
    status_description: str | None
    schema_url: str | None

    def attribute(self, key: str) -> object:
        """Return one attribute, `None` when it is absent."""
        return self.attributes.get(key)


def read_exported_spans(path: Path | str, session_id: str | None = None) -> list[ExportedSpan]:
    """Read a span file, optionally only the spans of one session (``session.id``), in export order.

    Args:
        path: The file `JsonLinesSpanExporter` writes; a missing file holds no spans.
        session_id: Keep only this session's spans.

    Returns:
        The spans.
    """
    file = Path(path)
    if not file.exists():
        return []
    spans: list[ExportedSpan] = []
    for line in file.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        raw = cast(dict[str, object], json.loads(line))
        attributes = cast(dict[str, object], raw["attributes"])
        if session_id is not None and attributes.get("session.id") != session_id:
            continue
        links = cast(list[dict[str, str]], raw["links"])
        spans.append(
            ExportedSpan(
                name=cast(str, raw["name"]),
                kind=cast(str, raw["kind"]),
                trace_id=cast(str, raw["trace_id"]),
                span_id=cast(str, raw["span_id"]),
                parent_span_id=cast(str | None, raw["parent_span_id"]),
                parent_trace_id=cast(str | None, raw["parent_trace_id"]),
                start_ns=cast(int, raw["start_ns"]),
                end_ns=cast(int | None, raw["end_ns"]),
                attributes=attributes,
                links=tuple((link["trace_id"], link["span_id"]) for link in links),
                status=cast(str, raw["status"]),
                status_description=cast(str | None, raw["status_description"]),
                schema_url=cast(str | None, raw["schema_url"]),
            )
        )
    return spans


def export_spans_to_file(
    path: Path | str,
    *,
    sampler: Sampler | None = None,
    processors: Sequence[SpanProcessor] = (),
) -> TracerProvider:
    """Install an SDK `TracerProvider` as the global provider, appending every ended span to ``path``.

    Call it at the top of a Worker child's main, before ``run_agent_worker``.

    Args:
        path: The span file.
        sampler: The provider's sampler; the SDK default (parent-based, always on) when `None`.
        processors: More span processors, added after the file's.

    Returns:
        The installed provider.
    """
    provider = TracerProvider() if sampler is None else TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(path)))
    for processor in processors:
        provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider
