"""A provider's context-length refusal makes a compacting session summarize and call the model again.

The agent is Stepwise on LiteLLM's OpenAI provider, talking HTTP to the scripted provider server, whose
answer to turn 2 refuses any request over 12 KB as longer than the context window: the first turn's 20 KB
message puts turn 2's request over it, the session compacts (one summary call), and the smaller request that
follows is answered.
"""

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from dex_agents import AgentSessionClient
from dex_agents.testing import (
    AgentTestStack,
    ProviderFault,
    ScriptedResponse,
    executed_step_types,
    read_provider_requests,
    wait_for_turn_end,
)
from tests.stepwise_provider_agents import CORE_DIR, build_compacting_flow

FLOW = build_compacting_flow()
LONG_MESSAGE = "Here is my whole order history: " + "A-1 shipped late again. " * 850  # about 20 KB
REFUSED_FROM_BYTES = 12_000


@pytest_asyncio.fixture(loop_scope="function")
async def sessions(tmp_path: Path) -> AsyncIterator[tuple[AgentTestStack, AgentSessionClient]]:
    async with AgentTestStack(
        tmp_path, [FLOW], "tests.stepwise_provider_worker", worker_cwd=CORE_DIR
    ) as stack:
        await stack.start_worker()
        yield stack, stack.sessions(FLOW)


async def test_a_context_length_refusal_compacts_and_the_turn_completes(
    sessions: tuple[AgentTestStack, AgentSessionClient],
) -> None:
    stack, client = sessions
    session = stack.new_session_id("refused")
    too_long = ProviderFault(
        "context_length", attempts=(1, 2, 3), requests=None, min_request_bytes=REFUSED_FROM_BYTES
    )
    stack.scripts.set_turns(
        session,
        [
            [ScriptedResponse(text="I have read your order history.")],
            [ScriptedResponse(text="A-1 is your most delayed order.", provider_faults=(too_long,))],
        ],
    )
    await client.start_session(session, LONG_MESSAGE)
    await wait_for_turn_end(client, session, 1)
    assert await client.send_user_message(session, "Which order is the most delayed?")
    snapshot = await wait_for_turn_end(client, session, 2)

    assert snapshot.state is not None and snapshot.state.last_turn_error is None, snapshot.state
    assert snapshot.messages[-1].text == "A-1 is your most delayed order."
    assert snapshot.context_summary is not None
    steps = executed_step_types(await stack.read_step_history(session))
    assert steps[-3:] == ["RunModel", "CompactContext", "RunModel"], steps
    turn_two = [
        request for request in read_provider_requests(stack.state_dir, session) if request.turn_id == "turn-2"
    ]
    # The refused request, the summary call, and the smaller request that was answered.
    assert [request.fault for request in turn_two] == ["context_length", None, None], turn_two
    [summary] = [
        call for call in stack.invocations.read() if call.session_id == session and call.kind == "summary"
    ]
    assert any("shipped late again" in text for text in summary.model_input)
