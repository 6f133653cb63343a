"""Running a deliberately broken suite in a nested pytest, to prove a shared suite can fail."""

import subprocess
import sys
from pathlib import Path

CORE_DIR = Path(__file__).resolve().parents[1]


def run_nested_pytest(tmp_path: Path, *arguments: str, timeout: float) -> str:
    """Run ``pytest -q <arguments>`` in the core directory and return its output; it must exit with 1."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--basetemp={tmp_path / 'nested'}",
            *arguments,
        ],
        check=False,
        cwd=CORE_DIR,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-2000:]
    return result.stdout
