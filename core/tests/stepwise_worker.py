"""The Worker child of the Stepwise tests: the matrix Flows, the continuation, compaction and MCP agents."""

import os
from pathlib import Path

from dex_agents.testing import STATE_DIR_ENV, run_agent_worker
from tests.stepwise_agents import (
    SPEC,
    build_builderless_flow,
    build_compacting_flow,
    build_continuation_flow,
    build_mcp_flow,
)

if __name__ == "__main__":
    run_agent_worker(
        (
            *SPEC.build_flows().all,
            build_continuation_flow(),
            build_builderless_flow(),
            build_compacting_flow(),
            build_mcp_flow(Path(os.environ[STATE_DIR_ENV])),
        )
    )
