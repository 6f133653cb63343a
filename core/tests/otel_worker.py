"""The traced Worker child: the SDK writes every span to the test's span file as it ends.

Its sampler drops the ``invoke_agent`` roots of sessions named ``unsampled-...``, so their other spans are
dropped only if they follow the root's decision. An exporter that raises, wired so its errors reach the
session, fails every span of ``raising-...`` sessions and the non-root spans of ``raising-children-...``.
"""

import os
from collections.abc import Mapping, Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import Decision, ParentBased, Sampler, SamplingResult
from opentelemetry.trace import Link, SpanKind
from opentelemetry.util.types import Attributes

from dex_agents.testing import run_agent_worker
from dex_agents.testing.otel_spans import SPAN_FILE_ENV, export_spans_to_file
from tests.otel_agents import build_traced_flows

UNSAMPLED_PREFIX = "unsampled-"
RAISING_PREFIX = "raising-"
RAISING_CHILDREN_PREFIX = "raising-children-"


def _session(attributes: Mapping[str, object] | None) -> str:
    value = (attributes or {}).get("session.id")
    return value if isinstance(value, str) else ""


class DropUnsampledSessions(Sampler):
    def should_sample(
        self,
        parent_context: Context | None,
        trace_id: int,
        name: str,
        kind: SpanKind | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        trace_state: object = None,
    ) -> SamplingResult:
        # Only roots: a chat or tool span reaches this sampler only if it lost its parent; it is kept then.
        if name.startswith("invoke_agent") and _session(attributes).startswith(UNSAMPLED_PREFIX):
            return SamplingResult(Decision.DROP)
        return SamplingResult(Decision.RECORD_AND_SAMPLE, attributes)

    def get_description(self) -> str:
        return "DropUnsampledSessions"


class RaisingExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            session = _session(span.attributes)
            is_root = span.name.startswith("invoke_agent")
            if session.startswith(RAISING_CHILDREN_PREFIX) and not is_root:
                raise ConnectionError("the collector refused the span")
            if session.startswith(RAISING_PREFIX) and not session.startswith(RAISING_CHILDREN_PREFIX):
                raise ConnectionError("the collector refused the span")
        return SpanExportResult.SUCCESS


class ExportWithoutCatching(SpanProcessor):
    """Exports as each span ends and lets the exporter's error reach the code that ended the span."""

    def __init__(self, exporter: SpanExporter) -> None:
        self._exporter = exporter

    def on_end(self, span: ReadableSpan) -> None:
        self._exporter.export([span])


if __name__ == "__main__":
    export_spans_to_file(
        os.environ[SPAN_FILE_ENV],
        sampler=ParentBased(DropUnsampledSessions()),
        processors=[ExportWithoutCatching(RaisingExporter())],
    )
    run_agent_worker(build_traced_flows().traced)
