"""Part of the suite again, against a separately started server named by DEX_SERVER_ADDRESS."""

import os
import subprocess
import sys
from pathlib import Path

from dex_agents.testing import DevServerProcess

CORE_DIR = Path(__file__).resolve().parents[1]
RERUN = [
    "tests/test_matrix.py::TestCoreMatrix::test_1_read_tool_turn_shape_and_history_replay",
    "tests/test_matrix.py::TestCoreMatrix::test_3_approval_waits_beside_a_read_and_survives_a_worker_restart",
    "tests/test_matrix.py::TestCoreMatrix::test_5_worker_killed_in_single_attempt_write_reports_outcome_unknown",
    "tests/test_matrix.py::TestCoreMatrix::test_11_snapshot_returns_the_conversation",
    "tests/test_turns.py",
]


def test_suite_runs_against_an_already_running_server(tmp_path: Path) -> None:
    server = DevServerProcess(tmp_path / "shared.sqlite3", tmp_path / "shared.log")
    address = server.start()
    try:
        nested_tmp = tmp_path / "nested"
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                f"--basetemp={nested_tmp}",
                *RERUN,
            ],
            check=False,
            cwd=CORE_DIR,
            env={**os.environ, "DEX_SERVER_ADDRESS": address},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=170,
        )
    finally:
        server.stop()
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "11 passed" in result.stdout, result.stdout[-2000:]
    # The stacks started Workers but no server of their own: every Flow ran on the shared server.
    assert list(nested_tmp.rglob("worker-*.log"))
    assert not list(nested_tmp.rglob("devserver.log"))
    assert "listening on" in (tmp_path / "shared.log").read_text()
