"""The README's "Your own agent in three files", run from the README's text against a devserver.

The test supplies ``my_agent.py``, the one file the README leaves to the user: a scripted refund agent.
"""

from pathlib import Path

from dex_agents.testing import STATE_DIR_ENV, readme_snippets, run_readme_files

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
    client_imports = [line for line in snippets["client.py"].splitlines() if "import" in line]
    assert client_imports == ["import asyncio", "from dex_agents import AgentSessionClient, AgentSessionFlow"]

    # run_readme_files refuses a Worker or client file that does not name localhost:8801.
    files = {"worker.py": snippets["worker.py"], "client.py": snippets["client.py"], "my_agent.py": MY_AGENT}
    # The scripted runner keeps its scripts and invocation log in the directory STATE_DIR_ENV names.
    run = run_readme_files(
        tmp_path, files, worker="worker.py", client="client.py", env={STATE_DIR_ENV: str(tmp_path)}
    )
    assert run.client_returncode == 0, run.client_stderr
    assert run.client_stdout.splitlines() == [
        'approving refund_order {"order_id":"7"}',
        "turn-1 completed",
        "user: Please refund order 7, it arrived broken.",
        "assistant: refund_order",
        "tool: refund_order",
        "assistant: Order 7 is refunded.",
    ]
    assert run.worker_exit == 0, run.worker_log
