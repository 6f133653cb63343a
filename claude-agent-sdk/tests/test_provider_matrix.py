"""Provider faults through the real Claude Code CLI: the CLI is the provider client of every run.

The CLI talks HTTP to the package's scripted Messages API, which fails the requests that a scripted
response's `ProviderFault`s name (`tests.provider_matrix_spec`, with the CLI's own retries on). What each
fault does, measured with CLI 2.1.332 (see the README's "Provider errors and faults"):

- a 429 or 529 with `Retry-After` and a 500 are retried by the CLI itself; when it gives up, the attempt
  fails and `RunModel` retries it as a new CLI run;
- a stream cut mid-body makes the CLI ask again without streaming, and a stream without `stop_reason` is
  taken by the CLI as a final answer: the runner fails the attempt in both cases, so no partial answer
  counts and no call of one runs;
- a first byte slower than the CLI's `API_TIMEOUT_MS`, on every request the CLI tries, fails the attempt;
- malformed tool input JSON is refused by the CLI itself, before any hook, and the model reads why;
- a context-length refusal ends the turn with a `turn_error` that names the context window.
"""

from __future__ import annotations

import pytest
from dex_agents import CONTEXT_WINDOW_EXCEEDED_ERROR, AgentEventType, MessageRole
from dex_agents.testing import (
    ProviderFault,
    ScriptedResponse,
    read_agent_events,
    read_provider_requests,
    wait_for_turn_end,
)
from dex_agents.testing.matrix import MatrixHarness

from tests import test_matrix
from tests.provider_matrix_spec import API_TIMEOUT_SETTING, SPEC


class TestClaudeAgentSdkProviderMatrix(test_matrix.TestClaudeAgentSdkMatrix):
    spec = SPEC

    def requests(self, harness: MatrixHarness, session: str) -> list[tuple[int, int, str | None, bool]]:
        """The session's API requests as (RunModel attempt, request of the attempt, fault, streamed)."""
        return [
            (request.attempt, request.request, request.fault, request.stream)
            for request in read_provider_requests(harness.stack.state_dir, session)
        ]

    async def test_provider_cut_and_unfinished_answers_are_retried_and_never_taken_as_final(
        self, harness: MatrixHarness
    ) -> None:
        session = harness.stack.new_session_id("p-cut")
        write = harness.call(harness.tools.idempotent_write, "receipt-1")
        final = "The receipt of A-1 is on its way to the customer."
        harness.script(
            session,
            [
                ScriptedResponse(tool_calls=(write,), provider_faults=(ProviderFault("cut_stream"),)),
                ScriptedResponse(text=final, provider_faults=(ProviderFault("unfinished_stream"),)),
            ],
        )
        await harness.sessions.start_session(session, "Send the receipt of A-1")
        done = await wait_for_turn_end(harness.sessions, session, 1)

        assert done.state is not None and done.state.last_turn_error is None, done.state
        assert done.messages[-1].role is MessageRole.ASSISTANT and done.messages[-1].text == final
        assert len(harness.tool_runs(session, harness.tools.idempotent_write)) == 1
        # Each cut or unfinished answer failed its RunModel attempt, whatever the CLI tried within it, and
        # the second attempts answered.
        requests = self.requests(harness, session)
        assert [(a, f) for a, _, f, _ in requests if f] == [(1, "cut_stream"), (1, "unfinished_stream")], (
            requests
        )
        assert [(a, n, f) for a, n, f, _ in requests if a == 2] == [(2, 1, None), (2, 1, None)], requests
        events = await read_agent_events(harness.sessions, session)
        final_deltas = [
            event for event in events if event.type == AgentEventType.TEXT_DELTA and event.attempt == 2
        ]
        assert final_deltas, "the retried attempt's text streamed under attempt 2"

    async def test_provider_rate_limit_is_waited_out_and_server_errors_fail_the_attempt(
        self, harness: MatrixHarness
    ) -> None:
        session = harness.stack.new_session_id("p-429")
        read = harness.call(harness.tools.read, "read-1")
        harness.script(
            session,
            [
                ScriptedResponse(
                    tool_calls=(read,),
                    provider_faults=(ProviderFault("rate_limit", retry_after_seconds=2.0),),
                ),
                ScriptedResponse(
                    text="Order A-1 has shipped.",
                    provider_faults=(ProviderFault("server_error", requests=None),),
                ),
            ],
        )
        await harness.sessions.start_session(session, "Where is A-1?")
        done = await wait_for_turn_end(harness.sessions, session, 1)

        assert done.state is not None and done.state.last_turn_error is None, done.state
        assert done.messages[-1].text == "Order A-1 has shipped."
        requests = read_provider_requests(harness.stack.state_dir, session)
        # The CLI waited out the 429's Retry-After itself, within the attempt (whole seconds, as the API
        # sends it: CLI 2.1.332 read a "1.5" as one second).
        assert [(r.attempt, r.request, r.fault) for r in requests[:2]] == [(1, 1, "rate_limit"), (1, 2, None)]
        assert requests[1].at - requests[0].at >= 2.0
        # Both requests of the read's follow-up failed with 500 (the CLI's retry included), so the
        # attempt failed, and attempt 2 ran the whole CLI run again: the read ran in both (at least once).
        assert [(r.attempt, r.request, r.fault) for r in requests[2:]] == [
            (1, 3, "server_error"),
            (1, 4, "server_error"),
            (2, 1, None),
            (2, 2, None),
        ]
        assert [run.attempt for run in harness.tool_runs(session, harness.tools.read)] == [1, 2]

    async def test_provider_first_byte_past_the_timeout_fails_the_attempt(
        self, harness: MatrixHarness
    ) -> None:
        session = harness.stack.new_session_id("p-slow")
        slow = ProviderFault("slow_first_byte", requests=None, delay_seconds=4.0)
        harness.script(session, [ScriptedResponse(text="Here I am.", provider_faults=(slow,))])
        await harness.sessions.start_session(session, "Hello?", session_settings={API_TIMEOUT_SETTING: 1500})
        done = await wait_for_turn_end(harness.sessions, session, 1)

        assert done.state is not None and done.state.last_turn_error is None, done.state
        assert done.messages[-1].text == "Here I am."
        # The CLI timed out the request and its one retry; the attempt failed and attempt 2 answered.
        assert [
            (attempt, number, fault) for attempt, number, fault, _ in self.requests(harness, session)
        ] == [
            (1, 1, "slow_first_byte"),
            (1, 2, "slow_first_byte"),
            (2, 1, None),
        ]

    async def test_provider_malformed_tool_input_reaches_the_model_and_the_tool_never_runs(
        self, harness: MatrixHarness
    ) -> None:
        session = harness.stack.new_session_id("p-json")
        write = harness.call(harness.tools.idempotent_write, "receipt-1")
        malformed = ProviderFault("malformed_arguments", attempts=(1, 2, 3), requests=None)
        harness.script(
            session,
            [
                ScriptedResponse(tool_calls=(write,), provider_faults=(malformed,)),
                ScriptedResponse(text="I could not send it."),
            ],
        )
        await harness.sessions.start_session(session, "Send the receipt of A-1")
        done = await wait_for_turn_end(harness.sessions, session, 1)

        assert done.state is not None and done.state.last_turn_error is None, done.state
        assert done.messages[-1].text == "I could not send it."
        assert harness.tool_runs(session, harness.tools.idempotent_write) == []
        # The CLI refused the call before any hook and asked the model again in the same run.
        [first, second] = harness.model_calls(session)
        assert first.step_execution_id == second.step_execution_id
        assert "[receipt-1] error:" in second.model_input_text, second.model_input_text
        assert "could not be parsed as JSON" in second.model_input_text, second.model_input_text

    async def test_provider_context_length_refusal_ends_the_turn_and_the_next_turn_runs(
        self, harness: MatrixHarness
    ) -> None:
        session = harness.stack.new_session_id("p-ctx")
        refusal = ProviderFault("context_length", attempts=(1, 2, 3), requests=None)
        harness.script(
            session,
            [ScriptedResponse(text="never", provider_faults=(refusal,))],
            [ScriptedResponse(text="A shorter question, then.")],
        )
        await harness.sessions.start_session(session, "A very long question")
        ended = await wait_for_turn_end(harness.sessions, session, 1)
        assert ended.state is not None and ended.state.last_turn_error is not None
        assert CONTEXT_WINDOW_EXCEEDED_ERROR in ended.state.last_turn_error, ended.state.last_turn_error
        # Refused once: neither the CLI nor RunModel sent it again.
        assert [(a, n, f) for a, n, f, _ in self.requests(harness, session)] == [(1, 1, "context_length")]

        assert await harness.sessions.send_user_message(session, "Short one")
        done = await wait_for_turn_end(harness.sessions, session, 2)
        assert done.messages[-1].text == "A shorter question, then."


@pytest.fixture(autouse=True)
def _only_provider_tests(  # pyright: ignore[reportUnusedFunction] - pytest uses it
    request: pytest.FixtureRequest,
) -> None:
    # Until the kit selects items (AgentMatrixTests.only_items), the inherited items run in test_matrix.py.
    if not request.node.name.startswith("test_provider_"):
        pytest.skip("the matrix items run in tests/test_matrix.py against the same CLI and API")
