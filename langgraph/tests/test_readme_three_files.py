"""The README's "Run it yourself": its agent and client files, run from the README's text on a devserver."""

from pathlib import Path

from dex_agents.testing import readme_snippets, run_readme_files

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_agent_and_client_files_run_as_written(tmp_path: Path) -> None:
    snippets = readme_snippets(README)
    assert set(snippets) == {"devserver.sh", "agent.py", "client.py"}
    assert snippets["devserver.sh"].startswith("dex-devserver serve ")
    client_imports = [line for line in snippets["client.py"].splitlines() if "import" in line]
    assert client_imports == ["import asyncio", "from dex_agents import AgentSessionClient, AgentSessionFlow"]

    # run_readme_files runs `dex-devserver serve` on a free port instead of 8801; that is the one change.
    files = {name: snippets[name] for name in ("agent.py", "client.py")}
    run = run_readme_files(tmp_path, files, worker="agent.py", client="client.py")
    assert run.client_returncode == 0, run.client_stderr
    assert run.client_stdout.splitlines() == [
        'approving refund_order {"order_id":"7"}',
        "turn-1 completed",
        "user: Please refund order 7, it arrived broken.",
        "assistant: I will refund it.",
        "assistant: refund_order",
        "tool: refund_order",
        "assistant: Order 7 is refunded.",
    ]
    assert run.worker_exit == 0, run.worker_log
