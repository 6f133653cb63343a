"""Provider faults through the real Claude Code CLI: the CLI is the provider client of every run.

The CLI talks HTTP to the package's scripted Messages API, which fails the requests that a scripted
response's `ProviderFault`s name (`tests.provider_matrix_spec`, with the CLI's own retries on). This class
runs the matrix's provider items 19, 20 and 21; items 1 to 18 run in `tests/test_matrix.py` through the same
client and API, so the kit's `PROVIDER_MATRIX_ITEMS` 1, 2, 3, 5, 6, 9 and 13 are not run twice. Item 19
runs in its harness-mode form: a turn is one `RunModel` while its calls are reads, so the kit's script (a
read, then the final answer cut on its first attempt) never reaches its second fault; here a write splits
the turn into two `RunModel`s, each failed once by a partial answer. What the CLI does with each fault,
measured with CLI 2.1.332, is in the docs site's
`docs/pages/frameworks/claude-agent-sdk/models.md` ("Provider errors and faults").
"""

from __future__ import annotations

from dex_agents import AgentEventType
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
    only_items = (19, 20, 21)

    async def test_19_provider_faults_retry_the_model_call_and_never_store_a_partial_answer(
        self, harness: MatrixHarness
    ) -> None:
        """Harness mode: each partial answer fails its RunModel's attempt; the CLI waits out a 429."""
        session = harness.stack.new_session_id("m19")
        write = harness.call(harness.tools.idempotent_write, "receipt-1")
        final = "The receipt of A-1 is on its way to the customer."
        retry_after = 1.0
        harness.script(
            session,
            [
                ScriptedResponse(
                    tool_calls=(write,), provider_faults=(ProviderFault("unfinished_stream", requests=None),)
                ),
                ScriptedResponse(text=final, provider_faults=(ProviderFault("cut_stream", requests=None),)),
            ],
            [
                ScriptedResponse(
                    text="You are welcome.",
                    provider_faults=(
                        ProviderFault("rate_limit", requests=(1,), retry_after_seconds=retry_after),
                        ProviderFault("server_error", requests=None),
                    ),
                )
            ],
        )
        await harness.sessions.start_session(session, "Send the receipt of A-1")
        snapshot = await wait_for_turn_end(harness.sessions, session, 1)
        assert snapshot.state is not None and snapshot.state.last_turn_error is None, snapshot.state
        assert snapshot.messages[-1].text == final, snapshot.messages
        assert len(harness.tool_runs(session, harness.tools.idempotent_write)) == 1
        assert await harness.sessions.send_user_message(session, "Thanks!")
        snapshot = await wait_for_turn_end(harness.sessions, session, 2)
        assert snapshot.messages[-1].text == "You are welcome.", snapshot.messages

        requests = read_provider_requests(harness.stack.state_dir, session)
        steps = [request.step_execution_id for request in requests]
        # Each model call's first attempt failed, and its second answered; the CLI sent the 500 after the
        # 429 by itself (its one retry), no sooner than the 429's Retry-After, then gave up.
        assert [(steps.index(r.step_execution_id), r.attempt, r.fault) for r in requests] == [
            (0, 1, "unfinished_stream"),
            (0, 2, None),
            (2, 1, "cut_stream"),
            (2, 2, None),
            (4, 1, "rate_limit"),
            (4, 1, "server_error"),
            (4, 2, None),
        ], requests
        [limited] = [request for request in requests if request.fault == "rate_limit"]
        following = requests[requests.index(limited) + 1]
        assert following.at - limited.at >= retry_after * 0.95, (limited, following)
        assert await harness.executed(session) == [
            "StartAgentSession",
            "RunModel",
            "CallTool",
            "RunModel",
            "AwaitUserMessage",
            "RunModel",
        ]
        events = await read_agent_events(harness.sessions, session)
        streamed = {
            (event.step_execution_id, event.attempt)
            for event in events
            if event.type == AgentEventType.TEXT_DELTA
        }
        # The final answers streamed under their second attempts, which supersede the cut one's first half.
        assert {(steps[2], 2), (steps[4], 2)} <= streamed, streamed

        # A first byte later than the CLI's request timeout, on the request and on the CLI's retry of it,
        # fails the attempt; the next attempt answers.
        slow_session = harness.stack.new_session_id("m19-slow")
        slow = ProviderFault("slow_first_byte", requests=None, delay_seconds=5.0)
        harness.script(slow_session, [ScriptedResponse(text="Here I am.", provider_faults=(slow,))])
        await harness.sessions.start_session(
            slow_session, "Hello?", session_settings={API_TIMEOUT_SETTING: 2000}
        )
        snapshot = await wait_for_turn_end(harness.sessions, slow_session, 1)
        assert snapshot.state is not None and snapshot.state.last_turn_error is None, snapshot.state
        assert snapshot.messages[-1].text == "Here I am.", snapshot.messages
        slow_requests = read_provider_requests(harness.stack.state_dir, slow_session)
        assert [(r.attempt, r.request, r.fault) for r in slow_requests] == [
            (1, 1, "slow_first_byte"),
            (1, 2, "slow_first_byte"),
            (2, 1, None),
        ], slow_requests
