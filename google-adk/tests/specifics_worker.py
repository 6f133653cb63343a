"""The Worker child of `test_session_specifics.py`.

With a span file named (`SPAN_FILE_ENV`), it installs the OpenTelemetry SDK as the docs' tracing page
(docs/pages/frameworks/google-adk/tracing.md) recommends, wrapped in `without_adk_spans`, with a processor
that appends each span to the file as it ends.
"""

import os

from dex_agents.testing import run_agent_worker
from dex_agents.testing.otel_spans import SPAN_FILE_ENV, JsonLinesSpanExporter
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from dex_agents_google_adk import without_adk_spans
from tests.specifics_agents import build_flows

if __name__ == "__main__":
    if SPAN_FILE_ENV in os.environ:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(os.environ[SPAN_FILE_ENV])))
        trace.set_tracer_provider(without_adk_spans(provider))
    run_agent_worker(build_flows().all)
