"""The Worker child of `test_session_features.py`: its spans go to the test's span file as they end."""

import os

from dex_agents.testing import run_agent_worker
from dex_agents.testing.otel_spans import SPAN_FILE_ENV, export_spans_to_file

from tests.feature_agents import build_feature_flows

if __name__ == "__main__":
    export_spans_to_file(os.environ[SPAN_FILE_ENV])
    run_agent_worker(build_feature_flows())
