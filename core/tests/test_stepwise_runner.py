"""StepwiseRunner against the session's side of the contract, in process, through LiteLLM's real code path.

Every model call goes through ``litellm.acompletion(stream=True)`` to a LiteLLM custom provider: the
scripted model of `dex_agents.testing.stepwise`, or a provider defined here that streams given chunks.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from dex_agents import (
    UNKNOWN_TOOL_POLICY,
    AgentToolCall,
    AgentTurnContext,
    AgentTurnOutcome,
    AgentUsage,
    DeferredToolCall,
    DeferredToolExecution,
    MessageRole,
    ToolCallsRequested,
    ToolCallStatus,
    ToolEffect,
    ToolExecutionError,
    ToolExecutionResult,
    ToolPolicy,
    TurnCompleted,
    TurnContinued,
    current_tool_execution,
)
from dex_agents.stepwise import (
    END_TURN,
    MAX_CONSECUTIVE_CONTINUATIONS,
    AgentDefinition,
    InstructionContext,
    LiteLLMModelClient,
    StepwiseHistoryError,
    StepwiseRunner,
    ToolDefinition,
    TurnContinuation,
    TurnContinuationContext,
    TurnContinuationDecider,
    TurnContinuationDecision,
    function_tool,
)
from dex_agents.stepwise._litellm import litellm
from dex_agents.testing import (
    ModelCallScope,
    ScriptedResponse,
    ScriptedToolCall,
    ScriptStore,
    SessionSide,
    model_call_scope,
)
from dex_agents.testing.stepwise import scripted_model
from tests.stepwise_litellm import CustomLLM, chunk, chunk_model, tool_delta, usage_chunk

SESSION = "session-1"  # SessionSide's flow ID


async def lookup_order(order_id: str) -> str:
    """Look up an order's status.

    Args:
        order_id: The order to look up.
    """
    return f"{order_id} has shipped"


async def refund_order(order_id: str, amount: float) -> str:
    """Refund an order."""
    return f"refunded {amount} on {order_id}"


def read_call(tool_call_id: str, order_id: str = "A-1") -> ScriptedToolCall:
    return ScriptedToolCall("lookup_order", {"order_id": order_id}, tool_call_id)


class Driver:
    """Plays the session around a runner: scopes each model call and stores each outcome as RunModel does."""

    def __init__(self, runner: StepwiseRunner, **side_options: Any) -> None:
        self.runner = runner
        self.side = SessionSide(**side_options)
        self.step_number = 0

    def start(self, text: str) -> None:
        self.side.start_turn(self.runner.build_user_message(text))

    async def step(self, session_settings: Mapping[str, object] | None = None) -> AgentTurnOutcome:
        self.step_number += 1
        turn = self.side.context()
        if session_settings is not None:
            turn = dataclasses.replace(turn, session_settings=session_settings)
        scope = ModelCallScope(
            SESSION, turn.turn_id, turn.attempt, f"RunModel-{self.step_number}", frozenset(turn.tool_calls)
        )
        with model_call_scope(scope):
            outcome = await self.runner.run_model_step(turn)
        if isinstance(outcome, ToolCallsRequested):
            self.side.defer(outcome)
        elif isinstance(outcome, TurnContinued):
            self.side.store(outcome.new_messages)
            self.side.framework_run_state = outcome.framework_run_state
        return outcome

    async def run_tools(self) -> None:
        for tool_call_id, record in list(self.side.records.items()):
            if record.status is ToolCallStatus.APPROVED:
                try:
                    output = await self.side.execute(self.runner, tool_call_id)
                except ToolExecutionError as error:
                    self.side.finish(tool_call_id, ToolCallStatus.FAILED, error=error.message)
                else:
                    self.side.finish(tool_call_id, ToolCallStatus.SUCCEEDED, output=output)


@pytest.fixture
def store(tmp_path: Path) -> ScriptStore:
    return ScriptStore(tmp_path)


def scripted(
    store: ScriptStore, *turns: Sequence[ScriptedResponse], name: str = "runner-tests"
) -> LiteLLMModelClient:
    store.set_turns(SESSION, turns)
    return scripted_model(name, store)


def model_inputs(store: ScriptStore) -> list[tuple[str, ...]]:
    return [call.model_input for call in store.invocations.read() if call.kind == "model"]


async def test_text_and_reasoning_stream_to_the_turn_events_and_the_call_reports_its_usage() -> None:
    model = chunk_model(
        "thinker",
        chunk(reasoning_content="The user wants "),
        chunk(reasoning_content="a status."),
        chunk(content="Order A-1 "),
        chunk(content="has shipped."),
        usage_chunk(120, 30, cached=100, reasoning=12),
    )
    driver = Driver(StepwiseRunner(AgentDefinition(name="thinker", model=model)))
    driver.start("Where is A-1?")

    outcome = await driver.step()

    assert isinstance(outcome, TurnCompleted) and outcome.turn_error is None
    assert driver.side.reasoning_deltas() == ["The user wants ", "a status."]
    assert driver.side.text_deltas() == ["Order A-1 ", "has shipped."]
    assert outcome.usage == AgentUsage(
        model_calls=1, input_tokens=120, output_tokens=30, cached_input_tokens=100, reasoning_tokens=12
    )
    [answer] = outcome.new_messages
    assert (answer.role, answer.text) == (MessageRole.ASSISTANT, "Order A-1 has shipped.")
    assert json.loads(answer.framework_item) == {
        "role": "assistant",
        "content": "Order A-1 has shipped.",
        "reasoning_content": "The user wants a status.",
    }


class BlockingStream:
    """A provider response stream that sends one chunk, then waits for ever; it records being closed."""

    def __init__(self, waiting: asyncio.Event) -> None:
        self.waiting = waiting
        self.closed = False
        self._sent = False

    def __aiter__(self) -> BlockingStream:
        return self

    async def __anext__(self) -> object:
        if not self._sent:
            self._sent = True
            return chunk(content="Looking ")
        self.waiting.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        self.closed = True


class BlockingModel(CustomLLM):
    def __init__(self) -> None:
        super().__init__()
        self.waiting = asyncio.Event()
        self.streams: list[BlockingStream] = []

    def astreaming(self, *args: Any, **kwargs: Any) -> BlockingStream:  # pyright: ignore[reportIncompatibleMethodOverride]
        stream = BlockingStream(self.waiting)
        self.streams.append(stream)
        return stream


async def test_cancelling_run_model_step_cancels_the_litellm_call_and_closes_its_response_stream() -> None:
    blocking = BlockingModel()
    litellm.custom_provider_map.append({"provider": "dex-test-blocking", "custom_handler": blocking})
    driver = Driver(StepwiseRunner(AgentDefinition(name="slow", model="dex-test-blocking/slow")))
    driver.start("Where is A-1?")

    # cancel_turn cancels the RunModel coroutine exactly like this.
    call = asyncio.create_task(driver.step())
    await asyncio.wait_for(blocking.waiting.wait(), timeout=30)
    [stream] = blocking.streams
    assert not stream.closed
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call

    assert stream.closed, "the provider's response stream was left open"
    assert driver.side.text_deltas() == ["Looking "]


async def test_session_settings_choose_each_turns_model_and_instructions(tmp_path: Path) -> None:
    fast_store, deep_store = ScriptStore(tmp_path / "fast"), ScriptStore(tmp_path / "deep")
    fast_store.set_turns(SESSION, [[ScriptedResponse(text="Quick answer.")]] * 2)
    deep_store.set_turns(SESSION, [[ScriptedResponse(text="Thorough answer.")]] * 2)
    fast, deep = scripted_model("fast", fast_store), scripted_model("deep", deep_store)
    resolved: list[Mapping[str, object]] = []

    def resolve_model(settings: Mapping[str, object]) -> LiteLLMModelClient | str:
        resolved.append(settings)
        # A string is a LiteLLM model string, as a user of LiteLLM writes it.
        return deep.model_name if settings.get("tier") == "deep" else fast

    def instructions(context: InstructionContext) -> str:
        return f"Answer in {context.session_settings.get('language', 'English')}."

    driver = Driver(
        StepwiseRunner(
            AgentDefinition(name="tiered", model=fast, resolve_model=resolve_model, instructions=instructions)
        )
    )
    driver.start("Hello")
    first = await driver.step({"tier": "deep", "language": "German"})
    driver.side.store(first.new_messages if isinstance(first, TurnCompleted) else ())
    driver.start("Hello again")
    second = await driver.step({})

    assert isinstance(first, TurnCompleted) and first.new_messages[-1].text == "Thorough answer."
    assert isinstance(second, TurnCompleted) and second.new_messages[-1].text == "Quick answer."
    assert resolved == [{"tier": "deep", "language": "German"}, {}]
    [deep_input] = model_inputs(deep_store)
    [fast_input] = model_inputs(fast_store)
    assert deep_input[0] == "system: Answer in German."
    assert fast_input[0] == "system: Answer in English."
    # The second turn's model reads the first turn, which the other model answered.
    assert "assistant: Thorough answer." in fast_input


async def test_a_resolver_that_returns_no_model_fails_the_call_with_a_clear_error(store: ScriptStore) -> None:
    def resolve_model(settings: Mapping[str, object]) -> object:
        return 42

    model = scripted(store, [ScriptedResponse(text="Hi.")])
    definition = AgentDefinition(name="broken", model=model, resolve_model=resolve_model)  # pyright: ignore[reportArgumentType]
    driver = Driver(StepwiseRunner(definition))
    driver.start("Hello")
    with pytest.raises(
        TypeError, match="resolve_model's result must be a LiteLLM model string or a ModelClient, got int"
    ):
        await driver.step()


async def test_tool_calls_are_deferred_with_the_definitions_policies_and_run_once_each(
    store: ScriptStore,
) -> None:
    calls = (
        read_call("read-1"),
        ScriptedToolCall("refund_order", {"order_id": "A-1", "amount": 5}, "refund-1"),
        ScriptedToolCall("cancel_order", {"order_id": "A-1"}, "cancel-1"),
        ScriptedToolCall("launch_rocket", {"target": "moon"}, "rocket-1"),
    )
    model = scripted(
        store, [ScriptedResponse(text="On it.", tool_calls=calls), ScriptedResponse(text="Done.")]
    )

    async def cancel_order(order_id: str) -> str:
        return f"{order_id} cancelled"

    definition = AgentDefinition(
        name="orders",
        model=model,
        tools=[
            function_tool(lookup_order, effect=ToolEffect.READ),
            refund_order,  # no effect of its own: the session's default applies
            function_tool(cancel_order, effect="idempotent_write"),
        ],
    )
    session_policy = ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False)
    driver = Driver(StepwiseRunner(definition), tool_policies={"cancel_order": session_policy})
    driver.start("Refund and cancel A-1")

    outcome = await driver.step()

    assert isinstance(outcome, ToolCallsRequested)
    policies = {call.tool_call_id: call.policy for call in outcome.tool_calls}
    assert policies == {
        "read-1": ToolPolicy(ToolEffect.READ),
        "refund-1": ToolPolicy(ToolEffect.UNCLASSIFIED),  # unclassified: one attempt and an approval
        "cancel-1": session_policy,  # the session's explicit policy beats the definition's
        "rocket-1": UNKNOWN_TOOL_POLICY,
    }
    assert [call.arguments for call in outcome.tool_calls][:2] == [
        '{"order_id":"A-1"}',
        '{"amount":5,"order_id":"A-1"}',
    ]
    for record in list(driver.side.records.values()):
        if record.status is ToolCallStatus.AWAITING_APPROVAL:
            driver.side.finish(record.tool_call_id, ToolCallStatus.APPROVED)
    await driver.run_tools()
    finished = await driver.step()

    assert isinstance(finished, TurnCompleted)
    results = {
        message.tool_call_id: message.tool_output
        for message in finished.new_messages
        if message.role is MessageRole.TOOL
    }
    assert results == {
        "read-1": "A-1 has shipped",
        "refund-1": "refunded 5.0 on A-1",
        "cancel-1": "A-1 cancelled",
        "rocket-1": (
            "The tool call failed: unknown tool 'launch_rocket'; the tools of this agent are: cancel_order, "
            "lookup_order, refund_order"
        ),
    }
    # The second model call reads every result, each after its call.
    assert model_inputs(store)[1][-4:] == tuple(
        f"tool {name} [{tool_call_id}]: {results[tool_call_id]}"
        for name, tool_call_id in (
            ("lookup_order", "read-1"),
            ("refund_order", "refund-1"),
            ("cancel_order", "cancel-1"),
            ("launch_rocket", "rocket-1"),
        )
    )


class StockSource:
    """A tool source of another kind: it marks its calls, and counts how often it is listed."""

    def __init__(self) -> None:
        self.listings = 0

    async def list_tools(self) -> list[ToolDefinition]:
        self.listings += 1
        return [ToolDefinition("count_stock", "Count a SKU's stock.", {"type": "object", "properties": {}})]

    def deferred_tool_call(
        self, turn: AgentTurnContext, *, tool_call_id: str, tool_name: str, arguments: str
    ) -> DeferredToolCall:
        policy = turn.resolve_tool_policy(tool_name, framework_effect=ToolEffect.READ)
        return DeferredToolCall(tool_call_id, tool_name, arguments, policy, tool_source_reference="stock")

    def owns_tool_call(self, record: AgentToolCall) -> bool:
        return record.tool_source_reference == "stock"

    async def call_tool(self, execution: DeferredToolExecution) -> ToolExecutionResult:
        return ToolExecutionResult(f"42 in stock (key {execution.idempotency_key})")


async def test_a_tool_source_defers_its_calls_and_runs_them_in_another_worker_without_a_listing(
    store: ScriptStore,
) -> None:
    calls = (ScriptedToolCall("count_stock", {}, "stock-1"), read_call("read-1"))
    model = scripted(store, [ScriptedResponse(tool_calls=calls)])

    def runner(source: StockSource) -> StepwiseRunner:
        tools = [function_tool(lookup_order, effect="read"), source]
        return StepwiseRunner(AgentDefinition(name="orders", model=model, tools=tools))

    driver = Driver(runner(StockSource()))
    driver.start("How many A-1 are left, and where is A-1?")

    outcome = await driver.step()

    assert isinstance(outcome, ToolCallsRequested)
    assert [(call.tool_name, call.policy, call.tool_source_reference) for call in outcome.tool_calls] == [
        ("count_stock", ToolPolicy(ToolEffect.READ), "stock"),
        ("lookup_order", ToolPolicy(ToolEffect.READ), None),
    ]
    # The tool Steps run on a Worker that never listed the source: each call finds its source by its record.
    elsewhere = StockSource()
    driver.runner = runner(elsewhere)
    assert await driver.side.execute(driver.runner, "stock-1") == "42 in stock (key session-1/turn-1/stock-1)"
    assert await driver.side.execute(driver.runner, "read-1") == "A-1 has shipped"
    assert elsewhere.listings == 0


async def test_a_sync_tool_runs_off_the_event_loop_and_reads_its_tool_call(store: ScriptStore) -> None:
    seen: list[tuple[str, bool]] = []

    def send_receipt(order_id: str) -> str:
        execution = current_tool_execution()
        assert execution is not None
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            on_loop = False
        else:
            on_loop = True
        seen.append((execution.idempotency_key, on_loop))
        return f"receipt for {order_id} sent"

    model = scripted(
        store,
        [ScriptedResponse(tool_calls=(ScriptedToolCall("send_receipt", {"order_id": "A-1"}, "receipt-1"),))],
    )
    driver = Driver(
        StepwiseRunner(
            AgentDefinition(
                name="receipts", model=model, tools=[function_tool(send_receipt, effect="idempotent_write")]
            )
        )
    )
    driver.start("Send the receipt")
    await driver.step()

    assert await driver.side.execute(driver.runner, "receipt-1") == "receipt for A-1 sent"
    assert seen == [(f"{SESSION}/turn-1/receipt-1", False)]


async def test_arguments_the_tool_cannot_take_reach_the_model_as_a_failed_call_and_the_tool_never_runs(
    store: ScriptStore,
) -> None:
    runs: list[str] = []

    async def lookup(order_id: int) -> str:
        runs.append(str(order_id))
        return "found"

    model = scripted(
        store, [ScriptedResponse(tool_calls=(ScriptedToolCall("lookup", {"order": "x"}, "bad-1"),))]
    )
    driver = Driver(
        StepwiseRunner(
            AgentDefinition(name="strict", model=model, tools=[function_tool(lookup, effect="read")])
        )
    )
    driver.start("Look it up")
    await driver.step()
    record = driver.side.records["bad-1"]

    with pytest.raises(ToolExecutionError) as missing:
        await driver.side.execute(driver.runner, "bad-1")
    driver.side.records["bad-1"] = dataclasses.replace(record, arguments='{"order_id": NaN}')
    with pytest.raises(ToolExecutionError) as not_json:
        await driver.side.execute(driver.runner, "bad-1")
    driver.side.records["bad-1"] = dataclasses.replace(record, arguments="[1]")
    with pytest.raises(ToolExecutionError) as not_object:
        await driver.side.execute(driver.runner, "bad-1")

    assert missing.value.message == (
        "invalid arguments for tool 'lookup': order_id: Field required; order: Extra inputs are not permitted"
    )
    assert not_json.value.message == (
        "arguments must be a JSON object; the arguments of 'lookup' are not strict JSON "
        "(NaN is not a JSON number)"
    )
    assert (
        not_object.value.message
        == "arguments must be a JSON object; the arguments of 'lookup' are a JSON array"
    )
    assert runs == []


async def test_tool_call_ids_the_session_would_refuse_are_replaced_in_the_call_and_its_message() -> None:
    model = chunk_model(
        "sloppy-ids",
        tool_delta(0, "call/1", "lookup_order", '{"order_id":"A-1"}'),
        tool_delta(1, "", "lookup_order", '{"order_id":"B-2"}'),
        tool_delta(2, "call/1", "lookup_order", '{"order_id":"C-3"}'),
        usage_chunk(10, 5, finish="tool_calls"),
    )
    driver = Driver(StepwiseRunner(AgentDefinition(name="ids", model=model, tools=[lookup_order])))
    driver.start("Look up three orders")

    outcome = await driver.step()

    assert isinstance(outcome, ToolCallsRequested)
    ids = [call.tool_call_id for call in outcome.tool_calls]
    assert ids == ["call_1", "call-1", "call-2"]
    assert [message.tool_call_id for message in outcome.new_messages] == ids
    stored_ids = [
        json.loads(message.framework_item)["tool_calls"][0]["id"] for message in outcome.new_messages
    ]
    assert stored_ids == ids
    assert json.loads(outcome.framework_run_state)["pending_tool_call_ids"] == ids


def lookup_driver(model: LiteLLMModelClient, decide: TurnContinuationDecider) -> Driver:
    """A driver whose agent has the read tool `lookup_order` and the hook ``decide``, asked about A-1."""
    definition = AgentDefinition(
        name="orders",
        model=model,
        tools=[function_tool(lookup_order, effect="read")],
        decide_turn_continuation=decide,
    )
    driver = Driver(StepwiseRunner(definition))
    driver.start("Where is A-1?")
    return driver


def always_continue(context: TurnContinuationContext) -> TurnContinuationDecision:
    return TurnContinuation("Keep going.")


async def test_a_continuation_after_an_answer_stores_the_answer_and_the_message_and_calls_the_model_again(
    store: ScriptStore,
) -> None:
    decisions: list[TurnContinuationContext] = []

    async def continue_once(context: TurnContinuationContext) -> TurnContinuationDecision:
        decisions.append(context)
        return TurnContinuation("Check it once more.") if context.consecutive_continuations == 0 else None

    model = scripted(store, [ScriptedResponse(text="Draft answer.")])
    driver = Driver(
        StepwiseRunner(AgentDefinition(name="careful", model=model, decide_turn_continuation=continue_once))
    )
    driver.start("Write it")

    continued = await driver.step()
    completed = await driver.step()

    assert isinstance(continued, TurnContinued)
    assert [(message.role, message.text) for message in continued.new_messages] == [
        (MessageRole.ASSISTANT, "Draft answer."),
        (MessageRole.USER, "Check it once more."),
    ]
    assert continued.usage.model_calls == 1
    assert json.loads(continued.framework_run_state)["consecutive_continuations"] == 1
    assert isinstance(completed, TurnCompleted) and completed.turn_error is None
    assert [message.text for message in completed.new_messages] == ["Draft answer."]
    # The second request ends with the continuation as user text, as Anthropic models require.
    assert model_inputs(store)[1][-1] == "user: Check it once more."
    assert [context.consecutive_continuations for context in decisions] == [0, 1]
    assert decisions[0].session_settings == {} and decisions[0].turn_id == "turn-1"


async def test_nine_continuations_in_a_row_end_the_turn_with_turn_error_and_keep_every_answer(
    store: ScriptStore,
) -> None:
    model = scripted(store, [ScriptedResponse(text="Draft.")])
    driver = Driver(
        StepwiseRunner(
            AgentDefinition(name="restless", model=model, decide_turn_continuation=always_continue)
        )
    )
    driver.start("Write it")

    outcomes = [await driver.step() for _ in range(MAX_CONSECUTIVE_CONTINUATIONS + 1)]

    assert [type(outcome).__name__ for outcome in outcomes] == ["TurnContinued"] * 8 + ["TurnCompleted"]
    last = outcomes[-1]
    assert isinstance(last, TurnCompleted)
    assert (
        last.turn_error
        == "decide_turn_continuation asked for more than 8 continuations in a row, so the turn ended"
    )
    assert [message.text for message in last.new_messages] == ["Draft."]
    assert len(model_inputs(store)) == 9
    assert model_inputs(store)[-1][-2:] == ("assistant: Draft.", "user: Keep going.")


async def test_a_continuation_after_tool_calls_follows_their_results_in_the_next_model_call(
    store: ScriptStore,
) -> None:
    def summarize_after_tools(context: TurnContinuationContext) -> TurnContinuationDecision:
        return TurnContinuation("Now summarize in one line.") if context.asks_for_tools else None

    model = scripted(
        store, [ScriptedResponse(tool_calls=(read_call("read-1"),)), ScriptedResponse(text="A-1 shipped.")]
    )
    driver = lookup_driver(model, summarize_after_tools)

    requested = await driver.step()
    await driver.run_tools()
    completed = await driver.step()

    assert isinstance(requested, ToolCallsRequested)
    assert [message.tool_call_id for message in requested.new_messages] == ["read-1"]
    assert model_inputs(store)[1][-2:] == (
        "tool lookup_order [read-1]: A-1 has shipped",
        "user: Now summarize in one line.",
    )
    assert isinstance(completed, TurnCompleted) and completed.turn_error is None
    # The call was stored with ToolCallsRequested; the turn's end stores what followed it.
    assert [(message.role, message.text or message.tool_output) for message in completed.new_messages] == [
        (MessageRole.TOOL, "A-1 has shipped"),
        (MessageRole.USER, "Now summarize in one line."),
        (MessageRole.ASSISTANT, "A-1 shipped."),
    ]


async def test_end_after_tool_calls_ends_the_turn_with_their_results_and_no_model_call(
    store: ScriptStore,
) -> None:
    def end_after_tools(context: TurnContinuationContext) -> TurnContinuationDecision:
        return END_TURN if context.asks_for_tools else None

    model = scripted(
        store,
        [
            ScriptedResponse(text="Looking.", tool_calls=(read_call("read-1"),)),
            ScriptedResponse(text="unused"),
        ],
    )
    driver = lookup_driver(model, end_after_tools)

    await driver.step()
    await driver.run_tools()
    completed = await driver.step()

    assert isinstance(completed, TurnCompleted) and completed.turn_error is None
    assert completed.usage == AgentUsage()
    assert [message.tool_output for message in completed.new_messages] == ["A-1 has shipped"]
    assert [message.text or message.tool_name for message in driver.side.messages] == [
        "Where is A-1?",
        "Looking.",
        "lookup_order",
    ]
    assert len(model_inputs(store)) == 1


async def test_a_continuation_hook_that_raises_ends_the_turn_as_failed_and_keeps_the_answer(
    store: ScriptStore,
) -> None:
    def broken(context: TurnContinuationContext) -> TurnContinuationDecision:
        raise KeyError("reviewer")

    model = scripted(store, [ScriptedResponse(text="Here it is.")])
    driver = Driver(
        StepwiseRunner(AgentDefinition(name="hooked", model=model, decide_turn_continuation=broken))
    )
    driver.start("Write it")

    outcome = await driver.step()

    assert isinstance(outcome, TurnCompleted)
    assert outcome.turn_error == "decide_turn_continuation raised KeyError: 'reviewer'"
    assert [message.text for message in outcome.new_messages] == ["Here it is."]


async def test_unfinished_turn_messages_close_every_tool_call_with_its_result(store: ScriptStore) -> None:
    model = scripted(
        store,
        [ScriptedResponse(text="Checking.", tool_calls=(read_call("read-1"), read_call("read-2", "B-2")))],
    )
    driver = Driver(
        StepwiseRunner(
            AgentDefinition(name="orders", model=model, tools=[function_tool(lookup_order, effect="read")])
        )
    )
    driver.start("Where are A-1 and B-2?")
    assert await driver.runner.build_unfinished_turn_messages(driver.side.context()) == []
    await driver.step()
    driver.side.finish("read-1", ToolCallStatus.SUCCEEDED, output="A-1 has shipped")
    driver.side.finish("read-2", ToolCallStatus.REJECTED, rejection_message="Not now.")

    unfinished = await driver.runner.build_unfinished_turn_messages(driver.side.context())

    # The answer and its calls were stored with the calls; only their results are missing.
    assert [(message.role, message.tool_call_id) for message in driver.side.messages[1:]] == [
        (MessageRole.ASSISTANT, None),
        (MessageRole.ASSISTANT, "read-1"),
        (MessageRole.ASSISTANT, "read-2"),
    ]
    assert [(message.role, message.tool_call_id, message.tool_output) for message in unfinished] == [
        (MessageRole.TOOL, "read-1", "A-1 has shipped"),
        (MessageRole.TOOL, "read-2", "Not now."),
    ]


async def test_a_history_another_runner_stored_fails_with_a_clear_error(store: ScriptStore) -> None:
    driver = Driver(
        StepwiseRunner(AgentDefinition(name="orders", model=scripted(store, [ScriptedResponse(text="Hi.")])))
    )
    driver.start("Hello")
    driver.side.messages[0] = dataclasses.replace(
        driver.side.messages[0], framework_item='{"kind":"request","parts":[]}'
    )

    with pytest.raises(StepwiseHistoryError, match="stored message 1 is not an OpenAI chat message"):
        await driver.step()


async def test_an_empty_answer_is_stored_with_empty_text_so_the_next_request_stays_valid() -> None:
    driver = Driver(
        StepwiseRunner(AgentDefinition(name="quiet", model=chunk_model("quiet", usage_chunk(5, 0))))
    )
    driver.start("Say nothing")

    outcome = await driver.step()

    assert isinstance(outcome, TurnCompleted)
    [answer] = outcome.new_messages
    assert json.loads(answer.framework_item) == {"role": "assistant", "content": ""}
