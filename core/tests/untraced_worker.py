"""The untraced Worker child: it serves the untraced Flow, and on a graceful stop writes which
OpenTelemetry modules it loaded to the file ``DEX_AGENTS_TEST_MODULES_FILE`` names."""

import json
import os
import sys
from pathlib import Path

from dex_agents.testing import run_agent_worker
from tests.trace_probe import build_untraced_flow

MODULES_FILE_ENV = "DEX_AGENTS_TEST_MODULES_FILE"

if __name__ == "__main__":
    run_agent_worker([build_untraced_flow()])
    loaded = sorted(name for name in sys.modules if name.split(".")[0] == "opentelemetry")
    Path(os.environ[MODULES_FILE_ENV]).write_text(json.dumps(loaded), encoding="utf-8")
