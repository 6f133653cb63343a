"""The Worker child of `tests.test_session_tools`: writes its spans to a file and serves the Flows."""

import os
from pathlib import Path

from dex_agents.testing import STATE_DIR_ENV, run_agent_worker
from dex_agents.testing.otel_spans import SPAN_FILE_ENV, export_spans_to_file

from tests.session_tools_agents import SHIPPING_URL_ENV, build_flows

if __name__ == "__main__":
    export_spans_to_file(os.environ[SPAN_FILE_ENV])
    run_agent_worker(build_flows(Path(os.environ[STATE_DIR_ENV]), os.environ.get(SHIPPING_URL_ENV, "")))
