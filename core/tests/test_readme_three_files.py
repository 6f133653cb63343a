"""The README's "Your own agent in three files", run from the README's text against a devserver.

The test supplies ``my_agent.py``, the one file the README leaves to the user: a scripted refund agent.
"""

import os
import signal
import subprocess
import sys
from pathlib import Path

from dex_agents.testing import STATE_DIR_ENV, DevServerProcess, readme_snippets

README = Path(__file__).resolve().parents[1] / "README.md"

MY_AGENT = """
from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy
from dex_agents.testing import ScriptedResponse, ScriptedRunner, ScriptedToolCall

REFUND = ScriptedToolCall("refund_order", {"order_id": "7"}, "refund-7", output="refund R-7 issued")
SCRIPT = [[ScriptedResponse(tool_calls=(REFUND,)), ScriptedResponse(text="Order 7 is refunded.")]]

flow = AgentSessionFlow(
    ScriptedRunner(default_turns=SCRIPT),
    flow_type="RefundAgent",
    options=AgentSessionOptions(tool_policies={"refund_order": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE)}),
)
"""


def test_the_worker_and_client_files_run_as_written(tmp_path: Path) -> None:
    snippets = readme_snippets(README)
    assert set(snippets) >= {"worker.py", "client.py"}
    assert "localhost:8801" in snippets["worker.py"] and "localhost:8801" in snippets["client.py"]
    client_imports = [line for line in snippets["client.py"].splitlines() if "import" in line]
    assert client_imports == ["import asyncio", "from dex_agents import AgentSessionClient, AgentSessionFlow"]

    server = DevServerProcess(tmp_path / "devserver.sqlite3", tmp_path / "devserver.log")
    server.start()
    try:
        # The one change: the private devserver listens on a free port instead of 8801.
        for name in ("worker.py", "client.py"):
            code = snippets[name].replace("localhost:8801", server.address)
            (tmp_path / name).write_text(code, encoding="utf-8")
        (tmp_path / "my_agent.py").write_text(MY_AGENT, encoding="utf-8")
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
                timeout=120,
            )
        finally:
            worker.send_signal(signal.SIGTERM)
            worker_exit = worker.wait(timeout=60)
    finally:
        server.stop()
    assert client.returncode == 0, client.stderr
    assert client.stdout.splitlines() == [
        'approving refund_order {"order_id":"7"}',
        "turn-1 completed",
        "user: Please refund order 7, it arrived broken.",
        "assistant: refund_order",
        "tool: refund_order",
        "assistant: Order 7 is refunded.",
    ]
    assert worker_exit == 0, (tmp_path / "worker.log").read_text()
