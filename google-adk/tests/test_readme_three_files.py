"""The README's "Run it yourself: three files", run from the README's own text against a devserver.

The Worker file and the client file are written out exactly as the README has them, except for the
server's address (a private devserver listens on a free port instead of 8801), and run as a user runs
them: the client starts a session, waits for the refund's approval, approves it and prints the transcript.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from dex_agents.testing import DevServerProcess, readme_snippets

from tests.matrix_spec import PACKAGE_DIR

README = PACKAGE_DIR / "README.md"


def test_the_worker_and_client_files_run_as_written(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    assert "dex-devserver serve" in text, "the README names the command that starts the server"
    snippets = readme_snippets(README)
    assert set(snippets) == {"worker.py", "client.py"}
    imports = [line for line in snippets["client.py"].splitlines() if "import" in line]
    assert imports == ["import asyncio", "from dex_agents import AgentSessionClient, AgentSessionFlow"], (
        "the client imports no framework"
    )

    server = DevServerProcess(tmp_path / "devserver.sqlite3", tmp_path / "devserver.log")
    server.start()
    try:
        for name, code in snippets.items():
            assert "localhost:8801" in code, name
            (tmp_path / name).write_text(code.replace("localhost:8801", server.address), encoding="utf-8")
        with (tmp_path / "worker.log").open("wb") as log:
            worker = subprocess.Popen([sys.executable, "worker.py"], cwd=tmp_path, stdout=log, stderr=log)
        try:
            client = subprocess.run(
                [sys.executable, "client.py"],
                check=False,
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=120,
            )
        finally:
            worker.send_signal(signal.SIGTERM)
            worker_exit = worker.wait(timeout=60)
    finally:
        server.stop()

    assert client.returncode == 0, client.stderr
    assert client.stdout.splitlines() == [
        'approving refund_order {"order_id": "7"}',
        "turn-1 completed",
        "user: Please refund order 7, it arrived broken.",
        "assistant: Let me refund that.",
        "assistant: refund_order",
        "tool: refund_order",
        "assistant: Order 7 is refunded.",
    ]
    assert worker_exit == 0, (tmp_path / "worker.log").read_text()
