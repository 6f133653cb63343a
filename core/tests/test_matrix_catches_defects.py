"""The matrix can fail: a runner that ignores tool policies lets a single-attempt write run twice."""

import subprocess
import sys
from pathlib import Path

CORE_DIR = Path(__file__).resolve().parents[1]


def test_matrix_fails_for_a_runner_that_ignores_tool_policies(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--basetemp={tmp_path / 'nested'}",
            "tests/broken_agents.py",
            "-k",
            "test_5_ or test_11_",
        ],
        check=False,
        cwd=CORE_DIR,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=170,
    )
    output = result.stdout
    assert result.returncode == 1, output[-3000:] + result.stderr[-2000:]
    # Called a read, the single-attempt write is retried after the Worker is killed inside it, so it runs
    # twice and item 5 fails; an ordinary turn still passes.
    assert "FAILED tests/broken_agents.py::TestBrokenMatrix::test_5_" in output, output[-3000:]
    assert "assert 2 == 1" in output, output[-3000:]
    assert "1 failed, 1 passed" in output, output[-3000:]
