"""The README's "Run it yourself", run from the README's text: its Worker and client files, on a devserver."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from dex_agents.testing import DevServerProcess, readme_snippets

from tests.matrix_spec import PACKAGE_DIR

README = PACKAGE_DIR / "README.md"


def test_the_worker_and_client_files_run_as_written(tmp_path: Path) -> None:
    snippets = readme_snippets(README)
    assert set(snippets) == {"worker.py", "client.py"}
    client_imports = [line for line in snippets["client.py"].splitlines() if "import" in line]
    assert client_imports == ["import asyncio", "from dex_agents import AgentSessionClient, AgentSessionFlow"]

    server = DevServerProcess(tmp_path / "devserver.sqlite3", tmp_path / "devserver.log")
    server.start()
    try:
        # The one change: the private devserver listens on a free port instead of 8801.
        for name, code in snippets.items():
            assert "localhost:8801" in code, name
            (tmp_path / name).write_text(code.replace("localhost:8801", server.address), encoding="utf-8")
        with (tmp_path / "worker.log").open("wb") as log:
            worker = subprocess.Popen(
                [sys.executable, "worker.py"], cwd=tmp_path, env=dict(os.environ), stdout=log, stderr=log
            )
        try:
            command = [sys.executable, "client.py"]
            client = subprocess.run(
                command, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
            )
        finally:
            # serve_agent_worker drains and returns on SIGTERM.
            worker.send_signal(signal.SIGTERM)
            worker_exit = worker.wait(timeout=60)
    finally:
        server.stop()

    assert client.returncode == 0, client.stderr
    assert client.stdout.splitlines() == [
        'approving refund_order {"order_id": "7"}',
        "turn-1 completed",
        "user: Please refund order 7, it arrived broken.",
        "assistant: refund_order",
        "tool: refund_order",
        "assistant: Order 7 is refunded.",
    ]
    assert worker_exit == 0, (tmp_path / "worker.log").read_text()
    # The README shows the output it prints.
    assert "\n".join(client.stdout.splitlines()) in README.read_text(encoding="utf-8")
