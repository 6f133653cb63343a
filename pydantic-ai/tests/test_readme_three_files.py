"""The README's "Run it yourself", run from the README's own text against a devserver.

The Worker file (the Pydantic AI agent with its scripted model) and the client file are written out
exactly as the README spells them, except for the server's address: the test's private devserver listens
on a free port instead of 8801.
"""

from pathlib import Path

from dex_agents.testing import readme_snippets, run_readme_files

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readmes_three_files_run_as_written(tmp_path: Path) -> None:
    snippets = readme_snippets(README)
    assert set(snippets) == {"agent_worker.py", "client.py", "devserver.sh"}
    assert snippets["devserver.sh"].splitlines()[-1].startswith("dex-devserver serve")
    client_imports = [line for line in snippets["client.py"].splitlines() if "import" in line]
    assert client_imports == [
        "import asyncio",
        "import uuid",
        "from dex_agents import AgentSessionClient, AgentSessionFlow",
    ], "the client imports no framework"

    # run_readme_files refuses a Worker or client file that does not name localhost:8801.
    files = {name: snippets[name] for name in ("agent_worker.py", "client.py")}
    run = run_readme_files(tmp_path, files, worker="agent_worker.py", client="client.py")
    assert run.client_returncode == 0, run.client_stderr
    assert run.client_stdout.splitlines() == [
        'approving refund_order {"order_id":"7"}',
        "turn-1 completed",
        "user: Order 7 arrived broken, please refund it.",
        "assistant: Sorry about that, I will refund order 7.",
        "assistant: refund_order",
        "tool: refund_order",
        "assistant: Order 7 is refunded.",
    ]
    assert run.worker_exit == 0, run.worker_log
