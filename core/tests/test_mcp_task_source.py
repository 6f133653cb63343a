"""McpToolSource with MCP tasks against the kit's inventory server, run as real stdio and HTTP subprocesses.

The session's side is played in process (`SessionSide`): the tool Step's call with its heartbeat checkpoint,
and each `PollToolTask` as the session builds it from the record, so every behaviour here is the source's.
"""

import dataclasses
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
import pytest_asyncio
from mcp import Client, MCPError, StdioServerParameters

from dex_agents import (
    AgentToolCall,
    QuestionAnswer,
    QuestionResolution,
    ToolCallsRequested,
    ToolCallStatus,
    ToolExecutionError,
    ToolExecutionResult,
    ToolInputRequested,
    ToolTaskCancellation,
    ToolTaskPending,
    ToolTaskPoll,
    ToolTaskStarted,
)
from dex_agents.mcp import (
    TASK_STATUS_EVENT,
    McpHttpServer,
    McpServer,
    McpStdioServer,
    McpToolSource,
    McpToolTaskError,
)
from dex_agents.mcp._task_state import TaskCheckpoint, TaskContinuation
from dex_agents.testing import (
    McpInventoryHttpServer,
    ScriptedRunner,
    SessionSide,
    mcp_inventory_server_command,
    start_mcp_inventory_http_server,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

_USER_MESSAGE = ScriptedRunner(tools=()).build_user_message("Ship it")


def _lines(log: Path, prefix: str = "") -> list[str]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if line.startswith(prefix)]


@dataclass
class Shipping:
    """The module's inventory server on Streamable HTTP, and its request log."""

    server: McpInventoryHttpServer
    log: Path

    def source(self, *more: McpServer) -> McpToolSource:
        return McpToolSource([McpHttpServer("shipping", self.server.url, trust_annotations=True), *more])


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shipping(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Shipping]:
    log = tmp_path_factory.mktemp("shipping") / "requests.log"
    async with await start_mcp_inventory_http_server(log) as server:
        yield Shipping(server, log)


def interval(outcome: object) -> int | float:
    """The poll interval of a started or pending task."""
    assert isinstance(outcome, ToolTaskStarted | ToolTaskPending), outcome
    return outcome.poll_interval_seconds


@dataclass
class Calls:
    """One turn's deferred calls, and the tool Step and poll inputs the session would build for them."""

    source: McpToolSource
    side: SessionSide = field(default_factory=SessionSide)
    saved: list[str] = field(default_factory=list[str])

    async def defer(self, *calls: tuple[str, str, dict[str, object]]) -> None:
        await self.source.list_tools()
        self.side.start_turn(_USER_MESSAGE)
        turn = self.side.context()
        deferred = [
            self.source.deferred_tool_call(
                turn, tool_call_id=call_id, tool_name=name, arguments=json.dumps(arguments)
            )
            for call_id, name, arguments in calls
        ]
        self.side.defer(ToolCallsRequested(framework_run_state="{}", tool_calls=deferred))

    async def run(
        self,
        call_id: str,
        *,
        polls_tasks: bool = True,
        attempt: int = 1,
        checkpoint: str | None = None,
    ) -> ToolExecutionResult | ToolInputRequested | ToolTaskStarted:
        async def save(value: str) -> None:
            self.saved.append(value)

        execution = dataclasses.replace(
            self.side.execution(call_id),
            attempt=attempt,
            supports_tool_tasks=polls_tasks,
            heartbeat_checkpoint=checkpoint,
            checkpoint_function=save,
        )
        outcome = await self.source.call_tool(execution)
        if isinstance(outcome, ToolTaskStarted):
            self.side.records[call_id] = dataclasses.replace(
                self.side.records[call_id],
                status=ToolCallStatus.WAITING_FOR_TASK,
                task_id=outcome.task_id,
                task_poll_interval_seconds=outcome.poll_interval_seconds,
            )
        return outcome

    def record(self, call_id: str) -> AgentToolCall:
        return self.side.records[call_id]

    def change(self, call_id: str, **changes: object) -> None:
        self.side.records[call_id] = dataclasses.replace(self.side.records[call_id], **changes)  # pyright: ignore[reportArgumentType]

    async def poll(
        self, call_id: str, *, attempt: int = 1, pending: QuestionAnswer | None = None
    ) -> ToolExecutionResult | ToolInputRequested | ToolTaskPending:
        """Poll the call's task once and store what the session stores from the outcome."""
        record = self.record(call_id)

        async def heartbeat() -> None:
            return None

        poll = ToolTaskPoll(
            flow_id=self.side.flow_id,
            tool_call=record,
            idempotency_key=f"{self.side.flow_id}/{self.side.turn_id}/{call_id}",
            attempt=attempt,
            input_answers=record.input_answers,
            events=self.side.context().events,
            heartbeat_function=heartbeat,
            pending_answer=pending,
        )
        outcome = await self.source.poll_tool_task(poll)
        if isinstance(outcome, ToolTaskPending):
            self.change(
                call_id,
                task_poll_interval_seconds=outcome.poll_interval_seconds,
                input_continuation=outcome.continuation,
            )
        elif isinstance(outcome, ToolInputRequested):
            self.change(call_id, input_continuation=outcome.continuation)
        return outcome

    async def cancel(self, call_id: str) -> None:
        async def heartbeat() -> None:
            return None

        await self.source.cancel_tool_task(
            ToolTaskCancellation(
                flow_id=self.side.flow_id,
                tool_call=self.record(call_id),
                idempotency_key=f"{self.side.flow_id}/{self.side.turn_id}/{call_id}",
                attempt=1,
                heartbeat_function=heartbeat,
            )
        )

    def statuses(self) -> list[tuple[str, str, str]]:
        """Each ``mcp.task_status`` event as (tool call, previous status, status)."""
        payloads = [
            json.loads(event.payload) for event in self.side.events if event.type == TASK_STATUS_EVENT
        ]
        return [(item["tool_call_id"], item["previous_status"], item["status"]) for item in payloads]


def stdio_server(log: Path) -> McpStdioServer:
    command = mcp_inventory_server_command(log)
    return McpStdioServer("inventory", command.command, command.args, env=command.env, trust_annotations=True)


async def test_a_task_handle_is_saved_before_the_task_is_handed_over_and_a_retry_hands_over_that_task(
    shipping: Shipping,
) -> None:
    log = shipping.log
    calls = Calls(shipping.source())
    await calls.defer(
        ("ship-1", "shipping__ship_order", {"sku": "H-1", "polls": 3, "poll_interval_ms": 1500})
    )

    started = await calls.run("ship-1")

    assert isinstance(started, ToolTaskStarted) and interval(started) == 2, started
    [saved] = calls.saved
    assert TaskCheckpoint.decode(saved, "shipping", "ship_order") == TaskCheckpoint(
        "shipping", "ship_order", started.task_id, 2
    )
    assert _lines(log, "tasks/") == ["tasks/create ship_order H-1"], "handed over without a poll"
    # A retried attempt reads the handle and hands over the same task without calling the tool again.
    again = await calls.run("ship-1", attempt=2, checkpoint=saved)
    assert again == started
    assert _lines(log, "tools/call ship_order H-1") == ["tools/call ship_order H-1"]
    # A checkpoint this source did not write (another tool's, or other code's) reads as none.
    for foreign in (
        saved.replace('"tool":"ship_order"', '"tool":"set_stock"'),
        "dex-agents/tool-task:" + started.task_id,
        '{"task_id": "x"}',
    ):
        other = await calls.run("ship-1", attempt=2, checkpoint=foreign)
        assert isinstance(other, ToolTaskStarted) and other.task_id != started.task_id
    assert len(_lines(log, "tasks/create ship_order H-1")) == 4


async def test_polls_follow_the_servers_interval_or_double_the_last_up_to_a_minute_and_report_changes(
    shipping: Shipping,
) -> None:
    log = shipping.log
    calls = Calls(shipping.source())
    await calls.defer(
        ("fast-1", "shipping__ship_order", {"sku": "I-1", "polls": 4, "poll_interval_ms": 1500}),
        ("slow-1", "shipping__ship_order", {"sku": "I-2", "polls": 2, "poll_interval_ms": 90_000}),
    )
    assert await calls.run("fast-1") == ToolTaskStarted(calls.record("fast-1").task_id or "", 2)

    # 1.5 s from the server, or double the last interval when that is longer, up to a minute.
    assert interval(await calls.poll("fast-1")) == 4
    calls.change("fast-1", task_poll_interval_seconds=40)
    assert interval(await calls.poll("fast-1")) == 60
    assert interval(await calls.poll("fast-1")) == 60
    assert await calls.poll("fast-1") == ToolExecutionResult("shipped I-1")
    # A server that asks for longer intervals gets them.
    assert interval(await calls.run("slow-1")) == 90
    assert interval(await calls.poll("slow-1")) == 90

    assert _lines(log, "tasks/get ship_order I-1") == ["tasks/get ship_order I-1 working"] * 3 + [
        "tasks/get ship_order I-1 completed"
    ], "one tasks/get per poll"
    assert calls.statuses() == [("fast-1", "working", "completed")], "an event only for a change"


async def test_a_runner_that_polls_no_tasks_gets_an_http_tasks_result_polled_inside_the_step(
    shipping: Shipping,
) -> None:
    log = shipping.log
    calls = Calls(shipping.source())
    await calls.defer(("ship-1", "shipping__ship_order", {"sku": "J-1", "polls": 2}))

    assert await calls.run("ship-1", polls_tasks=False) == ToolExecutionResult("shipped J-1")
    [saved] = calls.saved
    # A retried attempt follows the saved task (done by now) instead of calling the tool again.
    assert await calls.run("ship-1", polls_tasks=False, checkpoint=saved) == ToolExecutionResult(
        "shipped J-1"
    )
    assert _lines(log, "tools/call ship_order J-1") == ["tools/call ship_order J-1"]
    assert _lines(log, "tasks/get ship_order J-1") == [
        "tasks/get ship_order J-1 working",
        "tasks/get ship_order J-1 completed",
        "tasks/get ship_order J-1 completed",
    ]


async def test_a_stdio_servers_task_is_polled_inside_the_step_within_its_bound(tmp_path: Path) -> None:
    log = tmp_path / "stdio.log"
    calls = Calls(McpToolSource([stdio_server(log)], task_wait_timeout=timedelta(seconds=2)))
    await calls.defer(
        ("ship-1", "inventory__ship_order", {"sku": "S-1", "polls": 2}),
        ("ship-2", "inventory__ship_order", {"sku": "S-2", "polls": 1000}),
        ("carrier-1", "inventory__ship_with_carrier", {"sku": "S-3"}),
    )

    assert await calls.run("ship-1") == ToolExecutionResult("shipped S-1")
    assert calls.saved == [], "a stdio task dies with its connection, so its handle is not worth saving"
    assert calls.statuses() == [("ship-1", "working", "completed")]
    with pytest.raises(McpToolTaskError, match=r"did not finish within 2 seconds of polling inside the tool"):
        await calls.run("ship-2")
    with pytest.raises(ToolExecutionError) as asked:
        await calls.run("carrier-1")
    assert "asked for input that the session can only ask the user for a task it polls" in asked.value.message
    assert "carrier-1 (elicitation/create: 'Which carrier ships S-3?')" in asked.value.message
    assert asked.value.message.endswith("the task was cancelled")
    assert _lines(log, "tasks/cancel") == ["tasks/cancel ship_with_carrier S-3"]


async def test_a_tasks_question_gets_its_answer_once_and_only_while_the_task_lists_it(
    shipping: Shipping,
) -> None:
    log = shipping.log
    calls = Calls(shipping.source())
    await calls.defer(
        ("answered-1", "shipping__ship_with_carrier", {"sku": "Q-1"}),
        ("declined-1", "shipping__ship_with_carrier", {"sku": "Q-2"}),
        ("expired-1", "shipping__ship_with_carrier", {"sku": "Q-3"}),
    )
    for call_id in ("answered-1", "declined-1", "expired-1"):
        assert isinstance(await calls.run(call_id), ToolTaskStarted)
    question = await calls.poll("answered-1")
    assert isinstance(question, ToolInputRequested), question
    assert (question.question, question.choices, question.allows_free_text) == (
        "Which carrier ships Q-1?",
        (),
        True,
    )
    answer = QuestionAnswer("answered-1-input-1", question.question, "DHL")

    # A retried poll cannot tell whether an earlier attempt sent the answer: it asks again, sending nothing.
    assert await calls.poll("answered-1", attempt=2, pending=answer) == question
    assert _lines(log, "tasks/update ship_with_carrier Q-1") == []
    sent = await calls.poll("answered-1", pending=answer)
    assert isinstance(sent, ToolTaskPending) and sent.poll_interval_seconds == 1, sent
    assert _lines(log, "tasks/update ship_with_carrier Q-1") == [
        "tasks/update ship_with_carrier Q-1 carrier-1 accept DHL"
    ]
    # The server has not applied it yet and still lists the request: within 10 s that reads as working.
    assert await calls.poll("answered-1") == ToolTaskPending(1, sent.continuation)
    assert await calls.poll("answered-1") == ToolExecutionResult("shipped Q-1 with DHL")
    assert len(_lines(log, "tasks/update ship_with_carrier Q-1")) == 1

    # A decline reaches the task; a request still listed 10 s after the send is asked as a new question.
    declined = await calls.poll("declined-1")
    assert isinstance(declined, ToolInputRequested)
    decline = QuestionAnswer("declined-1-input-1", declined.question, "No.", QuestionResolution.DECLINED)
    assert isinstance(await calls.poll("declined-1", pending=decline), ToolTaskPending)
    continuation = TaskContinuation.decode(calls.record("declined-1").input_continuation)
    assert continuation is not None and continuation.sent_at is not None and continuation.declined
    later = dataclasses.replace(continuation, sent_at=continuation.sent_at - 11)
    calls.change("declined-1", input_continuation=later.encode())
    assert isinstance(await calls.poll("declined-1"), ToolInputRequested)
    assert await calls.poll("declined-1") == ToolExecutionResult("Q-2 was not shipped: no carrier was chosen")
    assert _lines(log, "tasks/update ship_with_carrier Q-2") == [
        "tasks/update ship_with_carrier Q-2 carrier-1 decline -"
    ]

    # A passed deadline cancels the form, and the server cancels the task: its effect is unknown.
    expired = await calls.poll("expired-1")
    assert isinstance(expired, ToolInputRequested)
    deadline = QuestionAnswer(
        "expired-1-input-1", expired.question, "question deadline passed", QuestionResolution.DEADLINE_PASSED
    )
    await calls.poll("expired-1", pending=deadline)
    await calls.poll("expired-1")
    with pytest.raises(McpToolTaskError, match="was cancelled by the server before it finished"):
        await calls.poll("expired-1")
    assert _lines(log, "tasks/update ship_with_carrier Q-3") == [
        "tasks/update ship_with_carrier Q-3 carrier-1 cancel -"
    ]
    assert ("answered-1", "input_required", "completed") in calls.statuses()


async def test_cancel_sends_tasks_cancel_and_takes_any_answer(shipping: Shipping, tmp_path: Path) -> None:
    log = shipping.log
    calls = Calls(shipping.source(stdio_server(tmp_path / "s.log")))
    await calls.defer(
        ("ship-1", "shipping__ship_order", {"sku": "X-1", "polls": 1000}),
        ("gone-1", "shipping__ship_order", {"sku": "X-2"}),
        ("local-1", "inventory__ship_order", {"sku": "X-3"}),
    )
    await calls.run("ship-1")
    await calls.cancel("ship-1")
    await calls.cancel("ship-1")  # idempotent: the server answers again, and nothing else happens
    assert _lines(log, "tasks/cancel ship_order X-1") == ["tasks/cancel ship_order X-1"] * 2
    with pytest.raises(McpToolTaskError, match="was cancelled by the server"):
        await calls.poll("ship-1")

    # A task the server does not know answers an error, which counts as done.
    calls.change("gone-1", status=ToolCallStatus.WAITING_FOR_TASK, task_id="no-such-task")
    await calls.cancel("gone-1")
    # A stdio server's task ended with its connection: there is nothing to reach.
    calls.change("local-1", status=ToolCallStatus.WAITING_FOR_TASK, task_id="some-task")
    await calls.cancel("local-1")
    assert not (tmp_path / "s.log").exists() or _lines(tmp_path / "s.log", "tasks/") == []


async def test_a_task_the_server_forgot_or_that_cannot_be_reached_fails_the_poll(
    shipping: Shipping,
) -> None:
    calls = Calls(shipping.source())
    await calls.defer(("ship-1", "shipping__ship_order", {"sku": "Y-1"}))
    calls.change("ship-1", status=ToolCallStatus.WAITING_FOR_TASK, task_id="forgotten")
    with pytest.raises(
        McpToolTaskError, match=r"'forgotten' .* no longer known to the server \(JSON-RPC error -32602"
    ):
        await calls.poll("ship-1")
    unreachable = McpToolSource([McpHttpServer("shipping", "http://127.0.0.1:1/mcp")])
    calls.source = unreachable
    with pytest.raises(McpToolTaskError, match="could not be polled"):
        await calls.poll("ship-1")
    with pytest.raises(McpToolTaskError, match="could not be cancelled"):
        await calls.cancel("ship-1")


async def test_a_client_without_the_tasks_extension_gets_a_plain_result_or_a_capability_error(
    tmp_path: Path,
) -> None:
    command = mcp_inventory_server_command(tmp_path / "plain.log")
    parameters = StdioServerParameters(command=command.command, args=command.args, env=command.env)
    async with Client(parameters) as client:
        result = await client.call_tool("ship_order", {"sku": "P-1", "polls": 5})
        assert [block.text for block in result.content] == ["shipped P-1"]  # pyright: ignore
        with pytest.raises(MCPError) as refused:
            await client.call_tool("ship_with_carrier", {"sku": "P-2"})
    assert refused.value.code == -32021
    assert _lines(tmp_path / "plain.log", "tasks/") == []
