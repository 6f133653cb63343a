"""Bad input, as a table: each row feeds the client, an RPC or a runner outcome one bad input, checks that
the answer names the problem, and ends with a normal turn in the same session, so nothing was lost.

Rows run against a real devserver and Worker, with the core's scripted runner (`ModelMistakesRunner` adds
malformed tool arguments); the provider rows run Stepwise on LiteLLM's OpenAI provider against the scripted
provider server, whose answers are the bad input. Every row's session script ends with the normal turn, which
`_finish_with_a_normal_turn` takes after the row.
"""

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import pytest
import pytest_asyncio
from dex import (
    DexServiceError,
    FlowAlreadyStartedError,
    FlowNotActiveOrNotFoundError,
    FlowNotFoundError,
    StartFlowOptions,
    WorkerInvocationError,
)

from dex_agents import (
    APPROVAL_DEADLINE_PASSED,
    CONTEXT_WINDOW_EXCEEDED_ERROR,
    DEFAULT_INLINE_TOOL_OUTPUT_BYTES,
    MAX_TOOL_OUTPUT_BYTES,
    MAX_USER_MESSAGE_BYTES,
    OUTCOME_UNKNOWN_TOOL_RESULT,
    AgentSessionClient,
    AgentSessionStartInput,
    AgentSessionStatus,
    AgentSnapshot,
    AgentUserMessage,
    MessageRole,
    SteerUserMessageRequest,
    UpdateSessionSettingsRequest,
    tool_output_view,
)
from dex_agents.limits import MAX_SESSION_SETTINGS_BYTES, MAX_STORED_VALUE_BYTES
from dex_agents.testing import (
    AgentTestStack,
    ProviderFault,
    ProviderFaultKind,
    ScriptedResponse,
    ScriptedToolCall,
    read_provider_requests,
    wait_for_agent_snapshot,
    wait_for_turn_end,
)
from dex_agents.testing.matrix import MatrixHarness
from tests.bad_input_agents import (
    BAD_INPUT_SPEC,
    BAD_PROVIDER_SPEC,
    DROPS_ITS_MESSAGES,
    RAW_ARGUMENTS,
    NotASessionFlow,
)

NORMAL_QUESTION = "Still there?"
NORMAL_ANSWER = "Yes, still here."
OVERSIZED = "x" * (MAX_USER_MESSAGE_BYTES + 1)
LONE_SURROGATE = "refund order A-1 \udcff please"


@dataclass(frozen=True)
class Table:
    harness: MatrixHarness
    not_a_session: NotASessionFlow
    provider_sessions: AgentSessionClient


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def table(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Table]:
    flows = BAD_INPUT_SPEC.build_flows()
    not_a_session = NotASessionFlow()
    provider_flow = BAD_PROVIDER_SPEC.build_flows().main
    async with AgentTestStack(
        tmp_path_factory.mktemp("bad-input"),
        (*flows.all, provider_flow, not_a_session),  # pyright: ignore[reportArgumentType]
        BAD_INPUT_SPEC.worker_module,
        worker_cwd=BAD_INPUT_SPEC.worker_cwd,
        # An RPC no Worker takes fails after the dispatch wait; keep the row that does it short.
        server_args=("--dispatch-wait", "2"),
    ) as stack:
        harness = MatrixHarness(BAD_INPUT_SPEC, stack, flows)
        await harness.ensure_worker()
        yield Table(harness, not_a_session, stack.sessions(provider_flow))


class Case:
    """One row's session: a fresh ID, its script (always ending with the normal turn) and helpers."""

    def __init__(self, table: Table, name: str) -> None:
        self.harness = table.harness
        self.not_a_session = table.not_a_session
        self.session = table.harness.stack.new_session_id(name[:24])
        self.sessions = table.harness.sessions
        self.provider_sessions = table.provider_sessions

    def use_provider_agent(self) -> None:
        """Run this row's session on the agent behind the scripted provider server."""
        self.sessions = self.provider_sessions

    def use_deadline_agent(self) -> None:
        """Run this row's session on the agent whose approvals have a deadline."""
        self.sessions = self.harness.deadline_sessions

    def script(self, *turns: list[ScriptedResponse]) -> None:
        self.harness.script(self.session, *turns, [ScriptedResponse(text=NORMAL_ANSWER)])

    async def start_idle(self) -> AgentSnapshot:
        self.script()
        await self.sessions.start_session(self.session)
        return await wait_for_turn_end(self.sessions, self.session, 0)

    async def start_with_one_turn(self) -> AgentSnapshot:
        self.script([ScriptedResponse(text="Hello.")])
        await self.sessions.start_session(self.session, "Hi")
        return await wait_for_turn_end(self.sessions, self.session, 1)

    async def failed_turn(self, turn_count: int) -> str:
        snapshot = await wait_for_turn_end(self.sessions, self.session, turn_count)
        assert snapshot.state is not None and snapshot.state.last_turn_error is not None, snapshot.state
        return snapshot.state.last_turn_error

    async def raw_send(self, message: AgentUserMessage) -> bool:
        """Send as a client that skips `AgentSessionClient`'s checks."""
        return await self.harness.stack.client.invoke_rpc(
            self.sessions.flow.send_user_message, self.session, message
        )

    async def raw_start(self, start: AgentSessionStartInput) -> AgentSnapshot:
        await self.harness.stack.client.start_flow(
            self.sessions.flow, self.session, start, StartFlowOptions()
        )
        return await wait_for_agent_snapshot(
            self.sessions,
            self.session,
            lambda snapshot: snapshot
            if snapshot.state is not None and snapshot.state.last_turn_error
            else None,
            description="the start to be refused",
        )

    def model_saw(self, *fragments: str) -> str:
        seen = self.harness.model_calls(self.session)[-1].model_input_text
        for fragment in fragments:
            assert fragment in seen, (fragment, seen[-2000:])
        return seen


Layer = Literal["client", "rpc", "runner", "provider"]


@dataclass(frozen=True)
class BadInput:
    name: str
    layer: Layer
    provoke: Callable[[Case], Awaitable[None]]


TABLE: list[BadInput] = []


def bad_input(
    layer: Layer,
) -> Callable[[Callable[[Case], Awaitable[None]]], Callable[[Case], Awaitable[None]]]:
    """Add the decorated row to the table, named after the function."""

    def register(provoke: Callable[[Case], Awaitable[None]]) -> Callable[[Case], Awaitable[None]]:
        TABLE.append(BadInput(f"{layer}-{provoke.__name__.replace('_', '-')}", layer, provoke))
        return provoke

    return register


async def _queue_is_empty_and_nothing_stored(case: Case, before: AgentSnapshot) -> None:
    after = await case.sessions.get_agent_snapshot(case.session)
    assert after.messages == before.messages and after.queued_message_count == 0, after
    assert after.state == before.state


async def _refund_waiting_for_approval(case: Case) -> None:
    """Start a turn whose refund (`refund-1`) waits for approval; the model then answers "Done."."""
    write = case.harness.call(case.harness.tools.approval_write, "refund-1")
    case.script([ScriptedResponse(tool_calls=(write,)), ScriptedResponse(text="Done.")])
    await case.sessions.start_session(case.session, "Refund A-1")
    await wait_for_agent_snapshot(
        case.sessions,
        case.session,
        lambda snapshot: bool(snapshot.pending_interrupts),
        description="an approval",
    )


# The client: AgentSessionClient refuses before anything reaches the session.


@bad_input("client")
async def blank_message(case: Case) -> None:
    before = await case.start_idle()
    for text in ("", "   ", "\n\t "):
        assert not await case.sessions.send_user_message(case.session, text)  # documented: False for blank
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("client")
async def oversized_message(case: Case) -> None:
    before = await case.start_with_one_turn()
    with pytest.raises(ValueError, match=r"is 262145 bytes of UTF-8, more than the 262144-byte limit"):
        await case.sessions.send_user_message(case.session, OVERSIZED)
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("client")
async def non_utf8_message(case: Case) -> None:
    before = await case.start_with_one_turn()
    with pytest.raises(
        ValueError, match=r"the user message is not valid UTF-8 text: character 17 is the lone"
    ):
        await case.sessions.send_user_message(case.session, LONE_SURROGATE)
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("client")
async def bytes_message(case: Case) -> None:
    before = await case.start_with_one_turn()
    with pytest.raises(TypeError, match="the user message must be str, got bytes"):
        await case.sessions.send_user_message(case.session, b"Hi again")  # pyright: ignore[reportArgumentType]
    await _queue_is_empty_and_nothing_stored(case, before)


async def _refused_start_then_start_idle(case: Case, message: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        await case.sessions.start_session(case.session, message)
    with pytest.raises(FlowNotFoundError):
        await case.harness.stack.client.describe_flow(case.session)
    await case.start_idle()


@bad_input("client")
async def oversized_initial_message(case: Case) -> None:
    await _refused_start_then_start_idle(case, OVERSIZED, "the initial message is 262145 bytes")


@bad_input("client")
async def non_utf8_initial_message(case: Case) -> None:
    await _refused_start_then_start_idle(case, "\ud800", "the initial message is not valid UTF-8 text")


@bad_input("client")
async def settings_that_are_not_json(case: Case) -> None:
    with pytest.raises(ValueError, match="session settings must hold only JSON values"):
        await case.sessions.start_session(case.session, "Hi", session_settings={"temperature": float("nan")})
    with pytest.raises(FlowNotFoundError):
        await case.harness.stack.client.describe_flow(case.session)
    await case.start_idle()


@bad_input("client")
async def oversized_settings_update(case: Case) -> None:
    before = await case.start_with_one_turn()
    with pytest.raises(ValueError, match=r"session settings are \d+ bytes of compact JSON, more than the"):
        await case.sessions.update_session_settings(case.session, {"notes": "x" * MAX_SESSION_SETTINGS_BYTES})
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("client")
async def empty_session_id(case: Case) -> None:
    with pytest.raises(ValueError, match="session_id must be a non-empty str, got ''"):
        await case.sessions.start_session("", "Hi")
    await case.start_idle()


@bad_input("client")
async def session_id_with_slash(case: Case) -> None:
    with pytest.raises(DexServiceError, match=r"flow_id '[^']*/x' must not contain '/'"):
        await case.sessions.start_session(f"{case.session}/x", "Hi")
    await case.start_idle()


@bad_input("client")
async def session_started_twice(case: Case) -> None:
    before = await case.start_with_one_turn()
    with pytest.raises(FlowAlreadyStartedError):
        await case.sessions.start_session(case.session, "Hi again")
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("client")
async def session_id_of_another_agents_session(case: Case) -> None:
    # Another agent's client meets the ID taken, not a second session under it.
    await case.start_with_one_turn()
    with pytest.raises(FlowAlreadyStartedError):
        await case.harness.deadline_sessions.start_session(case.session, "Hi")


@bad_input("client")
async def unknown_session(case: Case) -> None:
    unknown = f"{case.session}-never-started"
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: case.sessions.send_user_message(unknown, "Hi"),
        lambda: case.sessions.get_agent_snapshot(unknown),
        lambda: case.sessions.resolve_interrupt(unknown, "refund-1", approved=True),
        lambda: case.sessions.cancel_turn(unknown),
    ]
    for call in calls:
        with pytest.raises(FlowNotActiveOrNotFoundError, match=f"Flow '{re.escape(unknown)}' does not exist"):
            await call()
    await case.start_idle()


@bad_input("client")
async def session_client_for_a_flow_that_is_not_a_session(case: Case) -> None:
    with pytest.raises(TypeError, match="AgentSessionClient needs an AgentSessionFlow, got NotASessionFlow"):
        AgentSessionClient(case.harness.stack.client, case.not_a_session)  # pyright: ignore[reportArgumentType]
    await case.start_idle()


@bad_input("client")
async def session_call_to_a_flow_that_is_not_a_session(case: Case) -> None:
    other = f"{case.session}-other"
    await case.harness.stack.client.start_flow(case.not_a_session, other, "x", StartFlowOptions())
    # No Worker serves a session RPC for that Flow type; the error names both and says why.
    with pytest.raises(
        WorkerInvocationError,
        match=r"'get_agent_snapshot'.*Flow type 'BadInputNotASession'.*no pull Worker is registered for it",
    ):
        await case.sessions.get_agent_snapshot(other)
    await case.start_idle()


@bad_input("client")
async def steer_with_text_and_message_id(case: Case) -> None:
    before = await case.start_with_one_turn()
    with pytest.raises(ValueError, match="exactly one of text and message_id"):
        await case.sessions.steer_user_message(case.session, "Both", message_id="0190e4c1-queued")
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("client")
async def steer_with_neither_text_nor_message_id(case: Case) -> None:
    before = await case.start_with_one_turn()
    with pytest.raises(ValueError, match="exactly one of text and message_id"):
        await case.sessions.steer_user_message(case.session)
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("client")
async def oversized_steered_message(case: Case) -> None:
    before = await case.start_with_one_turn()
    with pytest.raises(ValueError, match="the steered message is 262145 bytes"):
        await case.sessions.steer_user_message(case.session, OVERSIZED)
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("client")
async def non_utf8_rejection_message(case: Case) -> None:
    await _refund_waiting_for_approval(case)
    with pytest.raises(ValueError, match="the rejection message is not valid UTF-8 text"):
        await case.sessions.resolve_interrupt(
            case.session, "refund-1", approved=False, rejection_message="\udcff"
        )
    # Nothing was sent: the approval still waits, and the answer that follows applies.
    assert await case.sessions.resolve_interrupt(case.session, "refund-1", approved=True)
    await wait_for_turn_end(case.sessions, case.session, 1)
    assert len(case.harness.tool_runs(case.session, case.harness.tools.approval_write)) == 1


@bad_input("client")
async def malformed_resume_token(case: Case) -> None:
    await case.start_with_one_turn()
    with pytest.raises(DexServiceError, match="resume_token 'no-such-token' is not a devserver token"):
        await case.sessions.read_agent_event(case.session, "no-such-token")


@bad_input("client")
async def malformed_event_page_token(case: Case) -> None:
    await case.start_with_one_turn()
    with pytest.raises(DexServiceError, match="before_page_token 'no-such-page' is not a devserver token"):
        await case.sessions.list_agent_events(case.session, before_page_token="no-such-page")


@bad_input("client")
async def event_page_size_of_zero(case: Case) -> None:
    await case.start_with_one_turn()
    with pytest.raises(ValueError, match="page size must be positive"):
        await case.sessions.list_agent_events(case.session, page_size=0)


# The RPCs, called by a client that skips AgentSessionClient's checks: they refuse as their contract says.


@bad_input("rpc")
async def raw_blank_message(case: Case) -> None:
    before = await case.start_with_one_turn()
    assert not await case.raw_send(AgentUserMessage(text=" \n "))
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("rpc")
async def raw_oversized_message(case: Case) -> None:
    before = await case.start_with_one_turn()
    assert not await case.raw_send(AgentUserMessage(text=OVERSIZED))
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("rpc")
async def raw_non_utf8_message(case: Case) -> None:
    before = await case.start_with_one_turn()
    assert not await case.raw_send(AgentUserMessage(text=LONE_SURROGATE))
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("rpc")
async def raw_plan_mode_message(case: Case) -> None:
    before = await case.start_with_one_turn()
    assert not await case.raw_send(AgentUserMessage(text="Plan it", plan_mode=True))
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("rpc")
async def raw_oversized_initial_message(case: Case) -> None:
    case.script()
    refused = await case.raw_start(AgentSessionStartInput(initial_message=OVERSIZED))
    assert refused.state is not None and refused.state.turn_count == 0 and refused.messages == ()
    assert refused.state.last_turn_error == (
        "the initial message is 262145 bytes of UTF-8, more than the 262144-byte limit, so no turn started"
    )


@bad_input("rpc")
async def raw_non_utf8_initial_message(case: Case) -> None:
    case.script()
    refused = await case.raw_start(AgentSessionStartInput(initial_message=LONE_SURROGATE))
    assert refused.state is not None and refused.state.turn_count == 0 and refused.messages == ()
    assert refused.state.last_turn_error == (
        "the initial message is not valid UTF-8 text (character 17 is a lone surrogate), so no turn started"
    )


@bad_input("rpc")
async def raw_start_with_settings_that_are_not_an_object(case: Case) -> None:
    # A raw start skips the client's check; the start Step refuses the settings and fails the session, which
    # never ran a turn, instead of starting one with settings the runner cannot read.
    case.script()
    start = AgentSessionStartInput(initial_message="Hi", session_settings=["big"])  # pyright: ignore[reportArgumentType]
    refused = await case.raw_start(start)
    assert refused.state is not None and refused.state.turn_count == 0 and refused.messages == ()
    assert refused.state.status is AgentSessionStatus.FAILED
    assert "session settings must be a JSON object, got list" in str(refused.state.last_turn_error)
    assert not case.harness.model_calls(case.session)
    case.session = case.harness.stack.new_session_id("settings-after")
    await case.start_idle()


@bad_input("rpc")
async def raw_oversized_settings_update(case: Case) -> None:
    before = await case.start_with_one_turn()
    request = UpdateSessionSettingsRequest(session_settings={"notes": "x" * (2 * MAX_SESSION_SETTINGS_BYTES)})
    assert not await case.harness.stack.client.invoke_rpc(
        case.sessions.flow.update_session_settings, case.session, request
    )
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("rpc")
async def unknown_interrupt(case: Case) -> None:
    await _refund_waiting_for_approval(case)
    assert not await case.sessions.resolve_interrupt(case.session, "no-such-interrupt", approved=True)
    assert not await case.sessions.resolve_interrupt(case.session, "", approved=True)
    assert await case.sessions.resolve_interrupt(case.session, "refund-1", approved=True)
    await wait_for_turn_end(case.sessions, case.session, 1)


@bad_input("rpc")
async def interrupt_resolved_twice(case: Case) -> None:
    await _refund_waiting_for_approval(case)
    assert await case.sessions.resolve_interrupt(case.session, "refund-1", approved=True)
    assert not await case.sessions.resolve_interrupt(case.session, "refund-1", approved=False)
    await wait_for_turn_end(case.sessions, case.session, 1)
    assert not await case.sessions.resolve_interrupt(case.session, "refund-1", approved=True)
    assert len(case.harness.tool_runs(case.session, case.harness.tools.approval_write)) == 1


@bad_input("rpc")
async def interrupt_answered_after_its_deadline(case: Case) -> None:
    case.use_deadline_agent()
    await _refund_waiting_for_approval(case)
    await wait_for_turn_end(case.sessions, case.session, 1)
    assert not await case.sessions.resolve_interrupt(case.session, "refund-1", approved=True)
    assert not case.harness.tool_runs(case.session, case.harness.tools.approval_write)
    case.model_saw(APPROVAL_DEADLINE_PASSED)


@bad_input("rpc")
async def raw_steer_with_text_and_message_id(case: Case) -> None:
    before = await case.start_with_one_turn()
    request = SteerUserMessageRequest(message_id="0190e4c1-queued", text="Both")
    assert not await case.harness.stack.client.invoke_rpc(
        case.sessions.flow.steer_user_message, case.session, request
    )
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("rpc")
async def steer_of_a_message_that_is_not_queued(case: Case) -> None:
    before = await case.start_with_one_turn()
    assert not await case.sessions.steer_user_message(case.session, message_id="0190e4c1-no-such-message")
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("rpc")
async def delete_of_a_message_that_is_not_queued(case: Case) -> None:
    before = await case.start_with_one_turn()
    assert not await case.sessions.delete_queued_message(case.session, "0190e4c1-no-such-message")
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("rpc")
async def cancel_with_no_turn_running(case: Case) -> None:
    before = await case.start_with_one_turn()
    assert not await case.sessions.cancel_turn(case.session)
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("rpc")
async def cancel_naming_another_turn(case: Case) -> None:
    case.script([ScriptedResponse(text="Hello.", gate="model")])
    await case.sessions.start_session(case.session, "Hi")
    gate = case.harness.stack.gate(case.session, "model")
    await gate.wait_until_reached()
    assert not await case.sessions.cancel_turn(case.session, "turn-7")
    gate.release()
    done = await wait_for_turn_end(case.sessions, case.session, 1)
    assert done.state is not None and done.state.last_turn_error is None  # the running turn went on


# Runner outcomes: what a model or runner gets wrong ends the call or the turn with an error that says so.


async def _turn_with_calls(case: Case, *calls: ScriptedToolCall, run_state_padding: int = 0) -> None:
    case.script(
        [
            ScriptedResponse(tool_calls=calls, run_state_padding=run_state_padding),
            ScriptedResponse(text="Done."),
        ]
    )
    await case.sessions.start_session(case.session, "Look up A-1")


async def _turn_failed_for_a_tool_call_id(case: Case, ids: tuple[str, ...], named: str) -> None:
    calls = tuple(ScriptedToolCall(case.harness.tools.read, {"order_id": "A-1"}, call_id) for call_id in ids)
    await _turn_with_calls(case, *calls)
    error = await case.failed_turn(1)
    assert "tool call ID" in error and named in error, error
    assert not case.harness.tool_runs(case.session, case.harness.tools.read)
    assert len(case.harness.model_calls(case.session)) == 1  # a deterministic failure is not retried


@bad_input("runner")
async def empty_tool_call_id(case: Case) -> None:
    await _turn_failed_for_a_tool_call_id(case, ("",), "has an empty tool call ID")


@bad_input("runner")
async def tool_call_id_with_a_slash(case: Case) -> None:
    await _turn_failed_for_a_tool_call_id(case, ("read/1",), "'read/1', which contains '/'")


@bad_input("runner")
async def tool_call_id_used_twice(case: Case) -> None:
    await _turn_failed_for_a_tool_call_id(case, ("read-1", "read-1"), "reuses the tool call ID 'read-1'")


async def _call_failed_for_its_arguments(case: Case, raw: str, named: str) -> None:
    call = ScriptedToolCall(case.harness.tools.idempotent_write, {RAW_ARGUMENTS: raw}, "receipt-1")
    await _turn_with_calls(case, call)
    done = await wait_for_turn_end(case.sessions, case.session, 1)
    assert done.state is not None and done.state.last_turn_error is None
    case.model_saw("The tool call failed:", named)
    # ToolExecutionError: recorded failed at once, the tool never ran.
    assert not case.harness.tool_runs(case.session, case.harness.tools.idempotent_write)


@bad_input("runner")
async def tool_arguments_that_are_not_an_object(case: Case) -> None:
    await _call_failed_for_its_arguments(case, "[1, 2]", "the arguments of 'send_receipt' are a JSON array")


@bad_input("runner")
async def tool_arguments_that_are_not_json(case: Case) -> None:
    await _call_failed_for_its_arguments(
        case, "{order_id: A-1", "the arguments of 'send_receipt' are not strict JSON"
    )


#: About 2 KB of JSON nested 1,000 levels deep: past the stdlib decoder's recursion limit.
DEEPLY_NESTED = "[" * 1000 + "]" * 1000


@bad_input("runner")
async def deeply_nested_arguments_to_a_single_attempt_write(case: Case) -> None:
    raw = '{"order_id":' + DEEPLY_NESTED + "}"
    call = ScriptedToolCall(case.harness.tools.single_attempt_write, {RAW_ARGUMENTS: raw}, "cancel-1")
    await _turn_with_calls(case, call)
    done = await wait_for_turn_end(case.sessions, case.session, 1)
    assert done.state is not None and done.state.last_turn_error is None, done.state
    # Failed before it ran, so the write is not outcome_unknown.
    seen = case.model_saw("The tool call failed:", "the arguments of 'cancel_order' nest too deeply")
    assert OUTCOME_UNKNOWN_TOOL_RESULT not in seen
    assert not case.harness.tool_runs(case.session, case.harness.tools.single_attempt_write)


@bad_input("runner")
async def deeply_nested_tool_output(case: Case) -> None:
    read = case.harness.call(case.harness.tools.read, "read-1", output=DEEPLY_NESTED)
    await _turn_with_calls(case, read)
    done = await wait_for_turn_end(case.sessions, case.session, 1)
    assert done.state is not None and done.state.last_turn_error is None, done.state
    # Output is text: stored and shown to the model as the tool returned it.
    case.model_saw(f"tool lookup_order [read-1]: {DEEPLY_NESTED}")
    [stored] = [message for message in done.messages if message.role == MessageRole.TOOL]
    assert stored.tool_output == DEEPLY_NESTED, stored
    assert len(case.harness.tool_runs(case.session, case.harness.tools.read)) == 1


@bad_input("runner")
async def call_to_an_unknown_tool(case: Case) -> None:
    await _turn_with_calls(case, ScriptedToolCall("launch_rocket", {"target": "moon"}, "rocket-1"))
    done = await wait_for_turn_end(case.sessions, case.session, 1)
    assert done.state is not None and done.state.last_turn_error is None
    case.model_saw("unknown tool 'launch_rocket'")


@bad_input("runner")
async def oversized_run_state(case: Case) -> None:
    read = case.harness.call(case.harness.tools.read, "read-1")
    await _turn_with_calls(case, read, run_state_padding=MAX_STORED_VALUE_BYTES + 1024)
    error = await case.failed_turn(1)
    assert f"more than the {MAX_STORED_VALUE_BYTES}-byte limit of one stored value" in error, error
    assert "framework run state" in error, error
    assert not case.harness.tool_runs(case.session, case.harness.tools.read)


@bad_input("runner")
async def oversized_tool_output(case: Case) -> None:
    read = case.harness.call(case.harness.tools.read, "read-1", output_size=MAX_STORED_VALUE_BYTES + 1024)
    await _turn_with_calls(case, read)
    done = await wait_for_turn_end(case.sessions, case.session, 1)
    assert done.state is not None and done.state.last_turn_error is None
    case.model_saw("The tool call failed:", f"more than the {MAX_STORED_VALUE_BYTES}-byte limit")
    assert len(case.harness.tool_runs(case.session, case.harness.tools.read)) == 1  # a size failure is final


@bad_input("runner")
async def turn_error_from_the_runner(case: Case) -> None:
    case.script([ScriptedResponse(text="I cannot help.", turn_error="guardrail tripped: refund policy")])
    await case.sessions.start_session(case.session, "Refund everything")
    assert await case.failed_turn(1) == "guardrail tripped: refund policy"
    assert len(case.harness.model_calls(case.session)) == 1


@bad_input("runner")
async def turn_error_without_the_turns_messages_after_a_tool_ran(case: Case) -> None:
    # The read's result lives only in the runner's state; failing the turn must still store it, or the
    # stored call has no result and the next provider request is refused.
    read = case.harness.call(case.harness.tools.read, "read-1")
    error = f"{DROPS_ITS_MESSAGES}: recursion limit reached"
    case.script([ScriptedResponse(tool_calls=(read,)), ScriptedResponse(turn_error=error)])
    await case.sessions.start_session(case.session, "Look up A-1")
    assert await case.failed_turn(1) == error
    snapshot = await case.sessions.get_agent_snapshot(case.session)
    results = [message for message in snapshot.messages if message.role == MessageRole.TOOL]
    assert [message.tool_call_id for message in results] == ["read-1"], snapshot.messages
    assert len(case.harness.tool_runs(case.session, case.harness.tools.read)) == 1


async def _finish_with_a_normal_turn(case: Case) -> None:
    snapshot = await case.sessions.get_agent_snapshot(case.session)
    state = snapshot.state
    assert state is not None and state.status == AgentSessionStatus.WAITING_FOR_USER_MESSAGE, state
    assert snapshot.queued_message_count == 0 and not snapshot.pending_interrupts, snapshot
    assert await case.sessions.send_user_message(case.session, NORMAL_QUESTION)
    done = await wait_for_turn_end(case.sessions, case.session, state.turn_count + 1)
    assert done.state is not None and done.state.last_turn_error is None, done.state
    assert [message.text for message in done.messages[-2:]] == [NORMAL_QUESTION, NORMAL_ANSWER]
    # A snapshot holds the newest messages that fit its budget; every one both hold is unchanged.
    before = {message.sequence: message for message in snapshot.messages}
    changed = [message for message in done.messages if before.get(message.sequence, message) != message]
    assert not changed, "a stored message changed"


# The largest inputs each limit allows: taken, stored, and followed by a normal turn on a fresh Worker.

#: 87,381 three-byte characters and one more byte: exactly MAX_USER_MESSAGE_BYTES of UTF-8, which JSON
#: escapes to six bytes a character (seven in the runner's item).
LARGEST_CJK_MESSAGE = "中" * (MAX_USER_MESSAGE_BYTES // 3) + "!"


@bad_input("client")
async def largest_message_of_cjk_text(case: Case) -> None:
    assert len(LARGEST_CJK_MESSAGE.encode()) == MAX_USER_MESSAGE_BYTES
    case.script([ScriptedResponse(text="Read it.")])
    await case.sessions.start_session(case.session, LARGEST_CJK_MESSAGE)
    done = await wait_for_turn_end(case.sessions, case.session, 1)
    assert done.state is not None and done.state.last_turn_error is None, done.state
    assert [message.text for message in done.messages] == [LARGEST_CJK_MESSAGE, "Read it."]
    case.model_saw(LARGEST_CJK_MESSAGE[:1000])
    await case.harness.replace_worker()


@bad_input("rpc")
async def message_whose_runner_message_cannot_be_stored(case: Case) -> None:
    # 65,536 emoji are exactly MAX_USER_MESSAGE_BYTES of UTF-8, but JSON escapes each to a surrogate pair
    # of twelve bytes (fourteen in the runner's item): the runner's message would not fit one stored value,
    # so the RPC refuses it before it is queued, instead of a turn that could never start.
    before = await case.start_with_one_turn()
    emoji = "\U0001f600" * (MAX_USER_MESSAGE_BYTES // 4)
    assert len(emoji.encode()) == MAX_USER_MESSAGE_BYTES
    assert not await case.sessions.send_user_message(case.session, emoji)
    assert not await case.sessions.steer_user_message(case.session, emoji)
    await _queue_is_empty_and_nothing_stored(case, before)


@bad_input("runner")
async def largest_tool_output(case: Case) -> None:
    read = case.harness.call(case.harness.tools.read, "read-1", output_size=MAX_TOOL_OUTPUT_BYTES)
    await _turn_with_calls(case, read)
    done = await wait_for_turn_end(case.sessions, case.session, 1)
    assert done.state is not None and done.state.last_turn_error is None, done.state
    whole = "x" * MAX_TOOL_OUTPUT_BYTES
    assert await case.sessions.get_tool_output(case.session, "turn-1", "read-1") == whole
    case.model_saw(tool_output_view(whole, DEFAULT_INLINE_TOOL_OUTPUT_BYTES))
    await case.harness.replace_worker()


@bad_input("client")
async def largest_settings(case: Case) -> None:
    # {"notes":"..."} of exactly MAX_SESSION_SETTINGS_BYTES of compact JSON.
    settings = {"notes": "s" * (MAX_SESSION_SETTINGS_BYTES - len('{"notes":""}'))}
    case.script([ScriptedResponse(text="Noted.")])
    await case.sessions.start_session(case.session, "Hi", session_settings=settings)
    done = await wait_for_turn_end(case.sessions, case.session, 1)
    assert done.state is not None and done.state.last_turn_error is None, done.state
    assert done.session_settings == settings
    await case.harness.replace_worker()


# The provider: the model provider's answer is the bad input, read by LiteLLM's real OpenAI client.


async def _provider_turn(case: Case, response: ScriptedResponse) -> str:
    """Run one turn on the provider agent whose model call meets ``response``; return its turn error."""
    case.use_provider_agent()
    case.script([response, ScriptedResponse(text="I could not do that.")])
    await case.sessions.start_session(case.session, "Where is order A-1?")
    snapshot = await wait_for_turn_end(case.sessions, case.session, 1)
    assert snapshot.state is not None
    return snapshot.state.last_turn_error or ""


def _always(kind: ProviderFaultKind) -> ProviderFault:
    return ProviderFault(kind, attempts=(1, 2, 3), requests=None)


@bad_input("provider")
async def tool_call_arguments_cut_short(case: Case) -> None:
    read = case.harness.call(case.harness.tools.read, "read-1")
    error = await _provider_turn(
        case, ScriptedResponse(tool_calls=(read,), provider_faults=(_always("malformed_arguments"),))
    )
    assert error == "", error
    assert not case.harness.tool_runs(case.session, case.harness.tools.read)
    case.model_saw("read-1", "arguments must be a JSON object", "are not strict JSON")


@bad_input("provider")
async def stream_cut_on_every_attempt(case: Case) -> None:
    error = await _provider_turn(
        case, ScriptedResponse(text="It was an accident.", provider_faults=(_always("cut_stream"),))
    )
    assert "It was an" not in [
        message.text for message in (await case.sessions.get_agent_snapshot(case.session)).messages
    ]
    assert "APIConnectionError" in error or "connection" in error.lower(), error


@bad_input("provider")
async def answer_without_a_finish_reason_on_every_attempt(case: Case) -> None:
    error = await _provider_turn(
        case, ScriptedResponse(text="It was an accident.", provider_faults=(_always("unfinished_stream"),))
    )
    assert "UnfinishedModelResponse" in error and "ended without a finish reason" in error, error
    snapshot = await case.sessions.get_agent_snapshot(case.session)
    assert "It was an accident." not in [message.text for message in snapshot.messages], snapshot.messages


@bad_input("provider")
async def request_refused_as_bad(case: Case) -> None:
    error = await _provider_turn(case, ScriptedResponse(turn_error="Invalid value for 'tool_choice'."))
    assert error.startswith("the model provider refused the call (HTTP 400): "), error
    assert "Invalid value for 'tool_choice'." in error, error
    requests = read_provider_requests(case.harness.stack.state_dir, case.session)
    assert {request.attempt for request in requests} == {1}, requests  # not retried


@bad_input("provider")
async def input_over_the_context_window(case: Case) -> None:
    error = await _provider_turn(
        case, ScriptedResponse(text="never", provider_faults=(_always("context_length"),))
    )
    assert error.startswith(CONTEXT_WINDOW_EXCEEDED_ERROR), error
    assert "AgentSessionOptions.compaction is not set" in error, error


def test_the_table_covers_the_client_the_rpcs_and_runner_outcomes() -> None:
    layers = [row.layer for row in TABLE]
    assert len(TABLE) >= 25 and len({row.name for row in TABLE}) == len(TABLE)
    assert all(layers.count(layer) >= 5 for layer in ("client", "rpc", "runner", "provider")), layers


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("row", TABLE, ids=[row.name for row in TABLE])
async def test_bad_input_is_refused_and_the_session_takes_a_normal_turn(table: Table, row: BadInput) -> None:
    case = Case(table, row.name)
    await row.provoke(case)
    await _finish_with_a_normal_turn(case)


@pytest.mark.asyncio(loop_scope="module")
async def test_empty_session_settings_mean_none(table: Table) -> None:
    case = Case(table, "no-settings")
    case.harness.script(case.session, [ScriptedResponse(text="Hello.")])
    start = AgentSessionStartInput(initial_message="Hi", session_settings={})
    await case.harness.stack.client.start_flow(case.sessions.flow, case.session, start, StartFlowOptions())
    snapshot = await wait_for_turn_end(case.sessions, case.session, 1)
    assert snapshot.state is not None and snapshot.state.last_turn_error is None
    assert [message.text for message in snapshot.messages] == ["Hi", "Hello."]


@pytest.mark.asyncio(loop_scope="module")
async def test_a_misspelled_tool_policy_found_at_run_time_fails_each_turn_before_any_tool_runs(
    table: Table,
) -> None:
    # ModelMistakesRunner lists its tools only once it made a model call, so the Flow was built.
    harness = table.harness
    flow = harness.flows.misspelled_policy
    assert flow is not None
    sessions = harness.stack.sessions(flow)
    session = harness.stack.new_session_id("misspelled-policy")
    write = harness.call(harness.tools.single_attempt_write, "cancel-1")
    harness.script(
        session,
        [ScriptedResponse(tool_calls=(write,)), ScriptedResponse(text="never sent")],
        [ScriptedResponse(tool_calls=(write,)), ScriptedResponse(text="never sent")],
    )
    expected = (
        "tool_policies names 'lookup_orde', but the agent has no tool by that name; did you mean "
        "'lookup_order'? Its tools: cancel_order, lookup_order, refund_order, send_receipt"
    )
    await sessions.start_session(session, "Cancel A-1")
    first = await wait_for_turn_end(sessions, session, 1)
    assert first.state is not None and first.state.last_turn_error == expected, first.state
    # The same policy fails the next turn the same way: the session waits for messages, nothing ran.
    assert await sessions.send_user_message(session, "Cancel A-1, please")
    second = await wait_for_turn_end(sessions, session, 2)
    assert second.state is not None and second.state.last_turn_error == expected, second.state
    assert not harness.tool_runs(session, harness.tools.single_attempt_write)
    assert second.tool_calls == () and not second.pending_interrupts, second
    assert [message.text for message in second.messages] == ["Cancel A-1", "Cancel A-1, please"]
    assert len(harness.model_calls(session)) == 2
