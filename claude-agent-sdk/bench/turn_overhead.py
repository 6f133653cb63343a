"""What durability costs per turn: the same Claude Agent SDK turn in process and as a Dex session.

    unshare -n bash -c 'ip link set lo up && exec uv run --locked --no-sync python -m bench.turn_overhead'
    uv run python -m bench.turn_overhead [--turns 10] [--concurrent 20] [--concurrent-turns 100]

The turn is the other adapters' turn: two model calls around one read tool. This adapter runs a read that
needs no approval inline, in the Claude Code CLI, so the whole turn is one CLI run that makes both model
calls and runs the tool between them: two Steps (`StartAgentSession`, one `RunModel`), where the other
adapters take four (their read runs in a `CallTool` Step, and a second `RunModel` follows).
The model is the package's `ScriptedClaudeApi`, so the figures are the CLI's, the SDK's, the adapter's
and the engine's cost, not model latency.

The in-process turn is the same agent run with `ClaudeSDKClient` directly: the same options, the tool in
an SDK MCP server `dex` (so the CLI names it `mcp__dex__lookup_order`, as under the runner) and allowed
by `allowed_tools`, partial messages streamed, and a fresh `HOME`, `CLAUDE_CONFIG_DIR` and working
directory per turn as the runner gives each run (made outside the timing). The durable turn runs on a
private devserver with one pull Worker child on this machine; its time is measured from `start_session` to
the `turn_completed` event. The timing and the figures are ``dex_agents_bench.run_turn_overhead_bench``.

That function's CPU figures count the Worker's own process only, not the CLI processes it starts and
reaps, so this module adds the CLI's CPU per turn: in process (this process's reaped children) and in the
Worker (its reaped children, over every durable turn, warm-up included); its overhead line names this
turn's two Steps. Its "run state at the tool boundary" is
measured with the read deferred (`inline_read_tools=False`), since an inline read leaves the session no
run state: it is what a turn that waits for one call stores, the CLI transcript's share included.

The CLI sends nothing but its model calls to 127.0.0.1 (`ISOLATION_ENV`); run it inside `unshare -n` as
`ci.sh` runs the tests, to be sure nothing leaves the machine. The defaults are the other adapters' (10
turns each way, then 20 sessions at once for 5 turns each); with a CLI run costing about half a second of
CPU, the run of 20 at once takes minutes on 2 cores; `--concurrent 2 --concurrent-turns 10` is quick.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from claude_agent_sdk import ClaudeAgentOptions, ClaudeSDKClient, ResultMessage, create_sdk_mcp_server
from dex_agents import ToolCallsRequested, ToolEffect, ToolPolicy
from dex_agents.testing import SessionSide
from dex_agents_bench import DurableTurn, InProcessTurn, run_turn_overhead_bench

from bench.agent import ANSWER, TOOLS, base_options, build_api, build_flow, build_runner
from dex_agents_claude_agent_sdk import ISOLATION_ENV
from dex_agents_claude_agent_sdk.testing import ScriptedClaudeApi

PACKAGE_DIR = Path(__file__).resolve().parents[1]
QUESTION = "Where is order A-1?"
WORKER_MODULE = "bench.worker"


def reaped_children_cpu_seconds() -> float:
    """CPU seconds (user + system) of this process's children that have ended and been waited for."""
    times = os.times()
    return times.children_user + times.children_system


class InProcessAgent:
    """The agent run with `ClaudeSDKClient`, against the scripted API served in this process."""

    def __init__(self, api: ScriptedClaudeApi, root: Path) -> None:
        self._api = api
        self._root = root
        self._options: ClaudeAgentOptions | None = None
        self.cli_cpu_seconds: list[float] = []

    async def prepare(self, number: int) -> None:
        """Build turn ``number``'s options, with a fresh home and working directory (not timed)."""
        run_dir = self._root / f"turn-{number}"
        home, config, work = run_dir / "home", run_dir / "config", run_dir / "work"
        for directory in (home, config, work):
            directory.mkdir(parents=True)
        agent_options = replace(
            base_options(),
            tools=[],
            mcp_servers={"dex": create_sdk_mcp_server("dex", tools=TOOLS)},
            allowed_tools=["mcp__dex__lookup_order"],
            include_partial_messages=True,
        )
        # The scripted API's options factory points the CLI at the API and adds its offline environment;
        # with options (not a function of the turn) it reads nothing of the turn context.
        options = await self._api.options(agent_options)(SessionSide().context())
        env = {**ISOLATION_ENV, **options.env, "HOME": str(home), "CLAUDE_CONFIG_DIR": str(config)}
        self._options = replace(options, env=env, cwd=work)

    async def run(self, number: int) -> None:
        """One turn: the question, the streamed messages up to the result."""
        del number
        assert self._options is not None
        cpu_before = reaped_children_cpu_seconds()
        result: ResultMessage | None = None
        async with ClaudeSDKClient(self._options) as client:
            await client.query(QUESTION)
            async for message in client.receive_response():
                if isinstance(message, ResultMessage):
                    result = message
        assert result is not None and result.result == ANSWER, result
        self.cli_cpu_seconds.append(reaped_children_cpu_seconds() - cpu_before)


class WorkerChildrenCpu:
    """Samples the CPU of the CLI processes the Worker child started and reaped, while it lives.

    It reads the Worker's ``/proc/<pid>/stat`` four times a second (Linux only) and looks for a new Worker
    child every two seconds. Each wake-up costs this process CPU (about 1 ms per second on a loaded
    2-core machine), which the client's CPU figures include; the last quarter second before the Worker
    is stopped may go unseen, which at most leaves out the CLI run of a turn that ended in it.
    """

    def __init__(self) -> None:
        self._seen: dict[int, float] = {}
        self._task: asyncio.Task[None] | None = None

    @property
    def seconds(self) -> float:
        return sum(self._seen.values())

    async def __aenter__(self) -> WorkerChildrenCpu:
        self._task = asyncio.create_task(self._sample())
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _sample(self) -> None:
        workers: list[int] = []
        for tick in itertools.count():
            if tick % 8 == 0:
                workers = _worker_pids()
            for pid in workers:
                seconds = _reaped_children_cpu_seconds_of(pid)
                if seconds is not None:
                    self._seen[pid] = max(self._seen.get(pid, 0.0), seconds)
            await asyncio.sleep(0.25)


def _worker_pids() -> list[int]:
    """This process's Worker children: those whose command line names `WORKER_MODULE`."""
    found: list[int] = []
    for thread in os.listdir(f"/proc/{os.getpid()}/task"):
        pids: list[str] = []
        children_file = f"/proc/{os.getpid()}/task/{thread}/children"
        with contextlib.suppress(OSError), open(children_file, encoding="ascii") as children:
            pids = children.read().split()
        for pid in pids:
            with contextlib.suppress(OSError), open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if WORKER_MODULE.encode() in cmdline.read().split(b"\0"):
                    found.append(int(pid))
    return found


def _reaped_children_cpu_seconds_of(pid: int) -> float | None:
    """The CPU seconds of the children ``pid`` has waited for (cutime + cstime), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


async def run_state_bytes() -> int:
    """The size of the run state the session stores while the turn's one call waits, the read deferred.

    The same agent with `inline_read_tools=False`: its first `RunModel` defers the read and returns the
    `ClaudeRunState` (the CLI session, the transcript entries of the run, the pending call).
    """
    api = build_api()
    runner = build_runner(api, inline_read_tools=False)
    session = SessionSide(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)})
    try:
        session.start_turn(runner.build_user_message(QUESTION))
        outcome = await runner.run_model_step(session.context())
    finally:
        await api.aclose()
    assert isinstance(outcome, ToolCallsRequested), outcome
    return len(outcome.framework_run_state.encode())


async def main(turns: int, concurrency: int, concurrent_turns: int) -> None:
    api = build_api()
    with tempfile.TemporaryDirectory(prefix="claude-turn-overhead-") as directory:
        agent = InProcessAgent(api, Path(directory))
        try:
            async with WorkerChildrenCpu() as worker_cli:
                started = time.perf_counter()
                await run_turn_overhead_bench(
                    turns,
                    InProcessTurn("ClaudeSDKClient", agent.run, prepare=agent.prepare, warm_up=True),
                    DurableTurn(
                        build_flow(),
                        WORKER_MODULE,
                        PACKAGE_DIR,
                        QUESTION,
                        "user, assistant text, assistant call, tool, assistant",
                        shape="2 model calls in 1 CLI run, read inline; 2 Steps: StartAgentSession, RunModel",
                    ),
                    run_state_bytes,
                    concurrency=concurrency,
                    concurrent_turns=concurrent_turns,
                )
                elapsed = time.perf_counter() - started
        finally:
            await api.aclose()
    # The in-process warm-up turn is left out, as its time is.
    in_process_cli = statistics.median(agent.cli_cpu_seconds[1:])
    durable_turns = 1 + turns + concurrent_turns
    print(
        f"CLI CPU per turn (ms), not in the figures above: in process median {in_process_cli * 1000:.0f}, "
        f"Worker's CLI runs {worker_cli.seconds / durable_turns * 1000:.0f} "
        f"(mean over its {durable_turns} turns, warm-up included)"
    )
    print(f"whole benchmark: {elapsed:.0f} s wall, load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Durable turn overhead of the Claude Agent SDK adapter")
    parser.add_argument("--turns", type=int, default=10, help="timed turns each way, one at a time")
    parser.add_argument("--concurrent", type=int, default=20, help="sessions at once in the throughput run")
    parser.add_argument(
        "--concurrent-turns", type=int, default=None, help="turns of the throughput run (5 per session)"
    )
    arguments = parser.parse_args()
    concurrent_turns: int = arguments.concurrent_turns or 5 * arguments.concurrent
    asyncio.run(main(arguments.turns, arguments.concurrent, concurrent_turns))
