"""Elicitations of the official server-everything as durable session questions: a devserver, a Worker child.

server-everything (the pinned npm package) speaks the 2025-11-25 protocol, so it sends ``elicitation/create``
while it holds ``tools/call`` open. The source turns it into a session question, abandons the call, and runs
it again with the answer once the user gave one; these tests kill the Worker while the question is open.
"""

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio

from dex_agents import AgentSessionClient, InterruptKind, ToolCallStatus
from dex_agents.testing import (
    AgentTestStack,
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    wait_for_turn_end,
)
from tests.agents import CORE_DIR
from tests.builtin_support import pending_interrupt, tool_call_record
from tests.mcp_agent import tool_outputs
from tests.mcp_everything_agent import EVERYTHING_BIN, build_everything_flow

pytestmark = pytest.mark.asyncio(loop_scope="module")


@dataclass
class Everything:
    stack: AgentTestStack
    sessions: AgentSessionClient

    def script(self, session: str, *calls: ScriptedToolCall) -> None:
        self.stack.scripts.set_turns(
            session, [[ScriptedResponse(tool_calls=calls), ScriptedResponse(text="Done.")]]
        )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def everything(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Everything]:
    assert EVERYTHING_BIN.exists(), f"run `npm ci` in {EVERYTHING_BIN.parents[2]} first"
    state_dir = tmp_path_factory.mktemp("mcp-everything")
    flow = build_everything_flow(state_dir)
    async with AgentTestStack(state_dir, [flow], "tests.mcp_everything_agent", worker_cwd=CORE_DIR) as stack:
        await stack.start_worker()
        yield Everything(stack, stack.sessions(flow))


async def test_a_form_elicitation_is_a_question_that_outlives_the_worker_and_its_answer_reaches_the_server(
    everything: Everything,
) -> None:
    session = everything.stack.new_session_id("elicit-form")
    everything.script(session, ScriptedToolCall("everything__trigger-elicitation-request", {}, "form-1"))
    await everything.sessions.start_session(session, "Collect my details")
    asked = await pending_interrupt(everything.sessions, session, "form-1-input-1")
    assert asked.kind is InterruptKind.QUESTION and asked.question is not None
    assert asked.question.startswith(
        "Please provide inputs for the following fields:\n\nAnswer with a JSON object"
    )
    assert "- name* (text): Your full, legal name" in asked.question
    assert "- integer (an integer from 1 to 100; default 42)" in asked.question
    assert (asked.allows_free_text, asked.choices) == (True, ("decline", "cancel"))

    # The question is durable: a new Worker takes the answer.
    everything.stack.kill_workers()
    await everything.stack.start_worker()
    assert await everything.sessions.answer_question(
        session, "form-1-input-1", '{"name": "Ada", "integer": 500}'
    )
    again = await pending_interrupt(everything.sessions, session, "form-1-input-2")
    assert again.question is not None and again.question.startswith(
        "Your last answer was not accepted: field 'integer' must be at most 100.\n\nPlease provide inputs"
    )
    answer = {
        "name": "Ada Lovelace",
        "check": True,
        "email": "ada@example.com",
        "untitledMultipleSelectEnum": ["Piano"],
    }
    assert await everything.sessions.answer_question(session, "form-1-input-2", json.dumps(answer))
    done = await wait_for_turn_end(everything.sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    output = tool_outputs(done)["form-1"]
    assert output.startswith(
        "✅ User provided the requested information!\nUser inputs:\n- Name: Ada Lovelace\n"
    )
    raw = json.loads(output.split("Raw result: ", 1)[1])
    # What the user gave, and every other field's default, as a form pre-filled with the defaults sends it.
    assert raw["action"] == "accept"
    assert raw["content"] | answer == raw["content"]
    assert (raw["content"]["integer"], raw["content"]["untitledSingleSelectEnum"]) == (42, "Monica")
    steps = executed_step_types(await everything.stack.read_step_history(session))
    assert steps.count("AwaitQuestionAnswer") >= 2 and steps.count("CallTool") == 3, steps


async def test_a_url_elicitation_carries_the_url_and_get_roots_list_sees_the_configured_roots(
    everything: Everything,
) -> None:
    session = everything.stack.new_session_id("elicit-url")
    everything.script(
        session,
        ScriptedToolCall(
            "everything__trigger-url-elicitation", {"url": "https://auth.example.com/grant"}, "url-1"
        ),
        ScriptedToolCall("everything__get-roots-list", {}, "roots-1"),
    )
    await everything.sessions.start_session(session, "Authorize, and show the roots")
    asked = await pending_interrupt(everything.sessions, session, "url-1-input-1")
    assert asked.question is not None
    assert (
        "Open this URL: https://auth.example.com/grant\nAnswer done once you finished there."
        in asked.question
    )
    assert (asked.allows_free_text, asked.choices) == (False, ("done", "decline", "cancel"))
    await tool_call_record(everything.sessions, session, "roots-1", ToolCallStatus.SUCCEEDED)
    assert await everything.sessions.answer_question(session, "url-1-input-1", "done")
    done = await wait_for_turn_end(everything.sessions, session, 1)

    assert done.state is not None and done.state.last_turn_error is None, done.state
    outputs = tool_outputs(done)
    assert outputs["url-1"].startswith("✅ User completed the URL elicitation flow.\n")
    assert "URL: https://auth.example.com/grant" in outputs["url-1"]
    assert outputs["roots-1"].startswith(
        "Current MCP Roots (2 total):\n\n1. shared\n   URI: file:///srv/shared\n\n2. Unnamed Root\n"
        "   URI: file:///srv/reports"
    )
