"""`AgentWorker` and `serve_agent_worker`: sizing, refusals, start, drain and stop against a real server."""

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from dex_devserver import DevServer, ServerOptions

from dex_agents import (
    AgentSessionClient,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    AgentWorker,
    DeferredToolCall,
    DeferredToolExecution,
    FrameworkMessage,
    MessageRole,
    ToolCallsRequested,
    ToolEffect,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
    TurnOutcome,
    agent_worker_task_slots,
)
from dex_agents._sdk_patches import (
    BLOB_LOADS_IN_PIECES_PATCH,
    HALF_CLOSE_AT_STOP_PATCH,
    SPARE_STREAM_PATCH,
    VERSION_LOOKUP_PATCH,
    applied_sdk_patches,
)
from dex_agents.testing import AgentTestStack, wait_until
from tests.agents import SPEC


class GatedToolRunner:
    """Calls ``slow_read`` once, whose run waits for :attr:`release`, then answers with its output."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.runs = 0

    def build_user_message(self, text: str) -> FrameworkMessage:
        return FrameworkMessage(role=MessageRole.USER, framework_item=json.dumps({"text": text}), text=text)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        usage = AgentUsage(model_calls=1)
        if turn.framework_run_state is None:
            call = DeferredToolCall("read-1", "slow_read", "{}", turn.resolve_tool_policy("slow_read"))
            return ToolCallsRequested('{"step":1}', (call,), usage)
        output = turn.recorded_tool_call("read-1").output or ""
        answer = FrameworkMessage(role=MessageRole.ASSISTANT, framework_item="{}", text=f"read {output}")
        return TurnCompleted((answer,), usage)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        self.runs += 1
        self.started.set()
        await self.release.wait()
        return ToolExecutionResult("the data")


def _flow(runner: GatedToolRunner) -> AgentSessionFlow:
    return AgentSessionFlow(
        runner,
        flow_type="AgentWorkerTest",
        options=AgentSessionOptions(tool_policies={"slow_read": ToolPolicy(ToolEffect.READ)}),
    )


def test_task_slots_cover_every_turns_tool_batch_plus_rpc_slots() -> None:
    assert agent_worker_task_slots() == 4 * (8 + 1) + 2
    assert agent_worker_task_slots(max_concurrent_turns=20, max_parallel_tool_calls=3, rpc_task_slots=1) == 81
    with pytest.raises(ValueError, match="at least 1"):
        agent_worker_task_slots(max_parallel_tool_calls=0)


def test_a_worker_refuses_what_it_cannot_serve() -> None:
    with pytest.raises(ValueError, match="at least one"):
        AgentWorker([])
    client_only = AgentSessionFlow.for_client(flow_type="OrderDesk")
    with pytest.raises(ValueError, match="for_client"):
        AgentWorker([client_only])
    with pytest.raises(ValueError, match="fewer RPC slots"):
        AgentWorker([_flow(GatedToolRunner())], max_concurrent_tasks=2, rpc_task_slots=2)
    assert AgentWorker([_flow(GatedToolRunner())]).max_concurrent_tasks == agent_worker_task_slots()


async def test_a_worker_that_cannot_reach_its_server_fails_to_start() -> None:
    worker = AgentWorker([_flow(GatedToolRunner())], server_address="127.0.0.1:9")
    with pytest.raises(RuntimeError):
        await worker.start(ready_timeout=timedelta(seconds=30))
    assert not worker.is_serving
    await worker.stop()  # harmless after a failed start


async def test_stop_drains_a_running_tool_and_its_result_is_kept(tmp_path: Path) -> None:
    runner = GatedToolRunner()
    flow = _flow(runner)
    async with AgentTestStack(tmp_path, [flow], SPEC.worker_module, worker_cwd=SPEC.worker_cwd) as stack:
        sessions = stack.sessions(flow)
        worker = AgentWorker([flow], server_address=stack.server_address, drain_timeout=timedelta(seconds=60))
        await worker.start()
        assert worker.is_serving
        assert applied_sdk_patches() == {
            VERSION_LOOKUP_PATCH,
            SPARE_STREAM_PATCH,
            BLOB_LOADS_IN_PIECES_PATCH,
            HALF_CLOSE_AT_STOP_PATCH,
        }
        with pytest.raises(RuntimeError, match="starts once"):
            await worker.start()

        await sessions.start_session("drained", "Read it")
        await asyncio.wait_for(runner.started.wait(), 60)
        stopping = asyncio.create_task(worker.stop())
        await wait_until("the Worker to stop taking tasks", lambda: not worker.is_serving)
        assert not stopping.done()  # the tool still runs, and stop waits for it
        runner.release.set()
        await stopping
        await worker.wait_stopped()

        # The drained tool's result was committed: a new Worker finishes the turn without running it again.
        async with AgentWorker([flow], server_address=stack.server_address):
            ended = await sessions.wait_for_turn_end("drained", timeout=timedelta(seconds=60))
        assert ended.outcome is TurnOutcome.COMPLETED
        assert ended.snapshot.messages[-1].text == "read the data"
        assert runner.runs == 1


async def test_a_worker_process_drains_and_exits_cleanly_on_sigterm(tmp_path: Path) -> None:
    flows = SPEC.build_flows()
    async with AgentTestStack(tmp_path, flows.all, SPEC.worker_module, worker_cwd=SPEC.worker_cwd) as stack:
        worker = await stack.start_worker()
        assert "task slots" in worker.read_log()
        worker.begin_stop()
        assert await asyncio.to_thread(worker.wait, 60) == 0


class _OneWriteRunner(GatedToolRunner):
    """Calls the single-attempt write ``send_receipt`` once, then answers with its output."""

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        usage = AgentUsage(model_calls=1)
        if turn.framework_run_state is None:
            call = DeferredToolCall(
                "receipt-1", "send_receipt", "{}", turn.resolve_tool_policy("send_receipt")
            )
            return ToolCallsRequested('{"step":1}', (call,), usage)
        output = turn.recorded_tool_call("receipt-1").output or ""
        answer = FrameworkMessage(role=MessageRole.ASSISTANT, framework_item="{}", text=output)
        return TurnCompleted((answer,), usage)

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        self.runs += 1
        return ToolExecutionResult("receipt sent")


async def test_a_write_sent_to_a_worker_as_it_stops_runs_on_the_next_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The server sends the write's task on an idle stream just as the Worker starts to stop. SDK 1.23.0
    # cancels idle streams at stop, which reads on the server as a Worker that died with the task: the only
    # attempt was used and the call recorded outcome_unknown though it never ran. Half-closed, the stream
    # hands the task back, and the next Worker runs the write once.
    runner = _OneWriteRunner()
    flow = AgentSessionFlow(
        runner,
        flow_type="AgentWorkerStopTest",
        options=AgentSessionOptions(
            tool_policies={
                "send_receipt": ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
            }
        ),
    )
    server = DevServer(ServerOptions(port=0, dispatch_wait=60))
    await server.start()
    try:
        first = AgentWorker([flow], server_address=server.address)
        await first.start()
        pool = server.dispatcher.pull
        run_task = pool.run_task
        stopping: list[asyncio.Task[None]] = []

        async def stop_as_the_write_goes_out(stream: Any, kind: Any, request: Any, *rest: Any) -> Any:
            if getattr(request, "step_type", "") == "CallSingleAttemptTool" and not stopping:
                stopping.append(asyncio.create_task(first.stop()))
            return await run_task(stream, kind, request, *rest)

        monkeypatch.setattr(pool, "run_task", stop_as_the_write_goes_out)
        async with AgentSessionClient.connect(server.address, flow) as sessions:
            await sessions.start_session("stopped", "Send the receipt")
            await wait_until(
                "the Worker to stop as the write goes out", lambda: bool(stopping) and stopping[0].done()
            )
            await first.wait_stopped()
            async with AgentWorker([flow], server_address=server.address):
                ended = await sessions.wait_for_turn_end("stopped", timeout=timedelta(seconds=60))
        assert ended.outcome is TurnOutcome.COMPLETED, ended
        assert ended.snapshot.messages[-1].text == "receipt sent"
        assert runner.runs == 1
    finally:
        await server.stop()
