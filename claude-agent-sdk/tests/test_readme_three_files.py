"""The README's "Run it yourself", run from the README's text: a devserver, its `worker.py`, its `client.py`.

The Worker runs the real Claude Code CLI against the README's scripted model; the client imports no
framework. The only change to the files is the devserver's address (a free port instead of 8801).
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

from dex_agents.testing import STATE_DIR_ENV, DevServerProcess, readme_snippets

from tests.matrix_spec import PACKAGE_DIR

README = PACKAGE_DIR / "README.md"


def test_the_worker_and_client_files_run_as_written(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    assert "dex-devserver serve" in text
    snippets = readme_snippets(README)
    assert set(snippets) >= {"worker.py", "client.py"}
    client_imports = [line for line in snippets["client.py"].splitlines() if "import" in line]
    assert client_imports == ["import asyncio", "from dex_agents import AgentSessionClient, AgentSessionFlow"]

    server = DevServerProcess(tmp_path / "devserver.sqlite3", tmp_path / "devserver.log")
    server.start()
    try:
        for name in ("worker.py", "client.py"):
            code = snippets[name]
            assert "localhost:8801" in code, name
            (tmp_path / name).write_text(code.replace("localhost:8801", server.address), encoding="utf-8")
        env = {**os.environ, STATE_DIR_ENV: str(tmp_path)}
        with (tmp_path / "worker.log").open("wb") as log:
            worker = subprocess.Popen(
                [sys.executable, "worker.py"], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT
            )
        try:
            client = subprocess.run(
                [sys.executable, "client.py"],
                check=False,
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=150,
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
        "assistant: Let me look.",
        "assistant: lookup_order",
        "tool: lookup_order",
        "assistant: refund_order",
        "tool: refund_order",
        "assistant: Order 7 is refunded.",
    ]
    assert worker_exit == 0, (tmp_path / "worker.log").read_text()
