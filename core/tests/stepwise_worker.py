"""The Worker child of the Stepwise tests: the matrix, continuation, compaction, MCP and desk Flows.

When the test names a span file (`SPAN_FILE_ENV`), the Worker writes every span it emits there.
"""

import os
from pathlib import Path

from dex_agents.testing import STATE_DIR_ENV, run_agent_worker
from dex_agents.testing.otel_spans import SPAN_FILE_ENV, export_spans_to_file
from tests.stepwise_agents import (
    SPEC,
    build_builderless_flow,
    build_compacting_flow,
    build_continuation_flow,
    build_mcp_flow,
)
from tests.stepwise_desk import build_desk_flow

if __name__ == "__main__":
    state_dir = Path(os.environ[STATE_DIR_ENV])
    if os.environ.get(SPAN_FILE_ENV):
        export_spans_to_file(os.environ[SPAN_FILE_ENV])
    run_agent_worker(
        (
            *SPEC.build_flows().all,
            build_continuation_flow(),
            build_builderless_flow(),
            build_compacting_flow(),
            build_mcp_flow(state_dir),
            build_desk_flow(state_dir),
        )
    )
