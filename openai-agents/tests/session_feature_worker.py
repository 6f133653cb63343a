"""The Worker child of `test_session_features.py`: it writes every span it emits to the test's span file."""

import os
from pathlib import Path

from dex_agents.testing import STATE_DIR_ENV, run_agent_worker
from dex_agents.testing.otel_spans import SPAN_FILE_ENV, export_spans_to_file

from tests.session_feature_agents import build_flows

if __name__ == "__main__":
    export_spans_to_file(os.environ[SPAN_FILE_ENV])
    run_agent_worker(build_flows(Path(os.environ[STATE_DIR_ENV])))
