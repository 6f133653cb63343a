"""A writer that leaves out fields with defaults (another language's client, a UI, dex-agents 0.1.0) drives a
session: the Worker's `agent_codec_registry` decodes its JSON with the defaults."""

import json
from collections.abc import Callable
from typing import Any

import pytest
from dex import (
    AsyncClient,
    BlobCacheConfig,
    ClientOptions,
    CodecRegistry,
    JsonCodec,
    Registry,
    WorkerTarget,
    open_blob_cache,
)

from dex_agents import (
    AgentSessionClient,
    AgentSessionStartInput,
    AgentUserMessage,
    CompactContextInput,
    ListAgentMessagesRequest,
    ResolveInterruptRequest,
    agent_codec_registry,
)
from dex_agents.testing import ScriptedResponse, wait_for_agent_snapshot, wait_for_turn_end
from dex_agents.testing.matrix import MatrixHarness


def _sparse(type_hint: type[Any], encode: Callable[[Any], dict[str, object]]) -> JsonCodec[Any]:
    # Encodes only the fields such a writer knows; its decoder is never used by this client.
    return JsonCodec(type_hint.__name__, lambda data: type_hint(**data), encode, type_hint)


SPARSE_WRITER = CodecRegistry(
    {
        AgentSessionStartInput: _sparse(
            AgentSessionStartInput, lambda v: {"initial_message": v.initial_message}
        ),
        AgentUserMessage: _sparse(AgentUserMessage, lambda v: {"text": v.text}),
        ResolveInterruptRequest: _sparse(
            ResolveInterruptRequest, lambda v: {"interrupt_id": v.interrupt_id, "approved": v.approved}
        ),
        ListAgentMessagesRequest: _sparse(ListAgentMessagesRequest, lambda v: {}),
        # A Python Registry needs a codec for every Step input, and the SDK derives none for this union.
        CompactContextInput | None: agent_codec_registry().resolve(CompactContextInput | None),
    }
)


def test_the_sparse_writer_leaves_out_the_defaulted_fields() -> None:
    start = json.loads(
        str(SPARSE_WRITER.resolve(AgentSessionStartInput).encode(AgentSessionStartInput("x")).data)
    )
    assert start == {"initial_message": "x"}
    message = json.loads(str(SPARSE_WRITER.resolve(AgentUserMessage).encode(AgentUserMessage("x")).data))
    assert message == {"text": "x"}
    request = ResolveInterruptRequest("call-1", approved=True)
    assert "rejection_message" not in str(SPARSE_WRITER.resolve(ResolveInterruptRequest).encode(request).data)


@pytest.mark.asyncio(loop_scope="module")
async def test_a_sparse_json_writer_drives_a_whole_session(harness: MatrixHarness) -> None:
    cache = open_blob_cache(
        BlobCacheConfig(str(harness.stack.state_dir / "sparse-writer-cache"), 16 * 1024 * 1024)
    )
    # A plain Registry: the SDK's default codecs plus the sparse writer's, none of dex_agents' codecs.
    client = AsyncClient(
        Registry(list(harness.flows.all), codec_registry=SPARSE_WRITER, allow_async_handlers=True),
        cache,
        ClientOptions(server_address=harness.stack.server_address, worker_target=WorkerTarget(pull=True)),
    )
    try:
        sparse = AgentSessionClient(client, harness.flows.main)
        session = harness.stack.new_session_id("sparse-json")
        call = harness.call(harness.tools.approval_write, "refund-1", order_id="refund-1")
        harness.script(
            session,
            [ScriptedResponse(tool_calls=(call,)), ScriptedResponse(text="Refunded.")],
            [ScriptedResponse(text="Yes.")],
        )
        # StartAgentSession's input arrives without session_settings.
        await sparse.start_session(session, "Refund order 1")
        await wait_for_agent_snapshot(
            harness.sessions,
            session,
            lambda snapshot: len(snapshot.pending_interrupts) == 1,
            description="the refund's approval to be pending",
        )
        # resolve_interrupt's request arrives without rejection_message.
        assert await sparse.resolve_interrupt(session, "refund-1", approved=True)
        first = await wait_for_turn_end(harness.sessions, session, 1)
        assert first.state is not None and first.state.last_turn_error is None
        assert first.messages[-1].text == "Refunded."
        assert len(harness.tool_runs(session, harness.tools.approval_write)) == 1
        # send_user_message's message arrives without plan_mode.
        assert await sparse.send_user_message(session, "Are you there?")
        second = await wait_for_turn_end(harness.sessions, session, 2)
        assert second.messages[-1].text == "Yes."
        # list_agent_messages's request arrives as {}.
        page = await sparse.list_agent_messages(session)
        assert [message.text for message in page.messages][-2:] == ["Are you there?", "Yes."]
    finally:
        await client.close()
