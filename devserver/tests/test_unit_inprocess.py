"""In-process checks of FlowService calls that need no Worker."""

import asyncio
from typing import Any

import grpc
import pytest
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pbg

from dex_devserver import DevServer, ServerOptions


async def test_wait_for_history_event_long_polls_until_the_next_event() -> None:
    server = DevServer(ServerOptions(port=0))
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub: Any = pbg.FlowServiceStub(channel)
            started = await stub.StartFlow(pb.StartFlowRequest(flow_id="w", flow_type="T", request_id="r"))
            first = await stub.WaitForHistoryEvent(
                pb.WaitForHistoryEventRequest(flow_id="w", run_id=started.run_id, next_internal_event_id=1)
            )
            assert (first.event_available, first.available_internal_event_id) == (True, 1)
            waiter = asyncio.ensure_future(
                stub.WaitForHistoryEvent(pb.WaitForHistoryEventRequest(flow_id="w", next_internal_event_id=2))
            )
            await stub.StopFlow(pb.StopFlowRequest(flow_id="w"))
            second = await asyncio.wait_for(waiter, 10)
            assert second.available_internal_event_id == 2
            assert second.flow_status == pb.FLOW_STATUS_CANCELED
    finally:
        await server.stop()


async def test_bad_input_is_refused_with_a_clear_error_and_changes_nothing() -> None:
    server = DevServer(ServerOptions(port=0))
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub: Any = pbg.FlowServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as reserved:
                await stub.StartFlow(pb.StartFlowRequest(flow_id="a/b", flow_type="T", request_id="r"))
            assert reserved.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "must not contain" in (reserved.value.details() or "")
            with pytest.raises(grpc.aio.AioRpcError) as unknown:
                await stub.GetFlowSummary(pb.GetFlowSummaryRequest(flow_id="a/b"))
            assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        await server.stop()


async def test_update_flow_config_merges_present_fields() -> None:
    server = DevServer(ServerOptions(port=0, default_worker_target="127.0.0.1:1"))
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub: Any = pbg.FlowServiceStub(channel)
            await stub.StartFlow(pb.StartFlowRequest(flow_id="u", flow_type="T", request_id="r"))
            await stub.UpdateFlowConfig(
                pb.UpdateFlowConfigRequest(
                    flow_id="u", flow_config=pb.FlowConfig(step_durability=pb.STEP_DURABILITY_ASYNC)
                )
            )
            state = await stub.GetFlowState(pb.GetFlowStateRequest(flow_id="u"))
            assert state.flow_config.step_durability == pb.STEP_DURABILITY_ASYNC
            assert state.flow_config.worker_target.address == "127.0.0.1:1"
            await stub.UpdateFlowConfig(
                pb.UpdateFlowConfigRequest(
                    flow_id="u", flow_config=pb.FlowConfig(worker_target=pb.WorkerTarget(is_pull_mode=True))
                )
            )
            state = await stub.GetFlowState(pb.GetFlowStateRequest(flow_id="u"))
            assert state.flow_config.worker_target.is_pull_mode
            assert state.flow_config.step_durability == pb.STEP_DURABILITY_ASYNC
    finally:
        await server.stop()


async def test_client_attribute_writes_and_message_deletes() -> None:
    server = DevServer(ServerOptions(port=0))
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub: Any = pbg.FlowServiceStub(channel)
            await stub.StartFlow(pb.StartFlowRequest(flow_id="c", flow_type="T", request_id="r"))
            await stub.SetAttributes(
                pb.SetAttributesRequest(
                    flow_id="c", attributes=[pb.AttributeWrite(key="k", value=pb.Value(string_value="v"))]
                )
            )
            await stub.PublishToChannel(
                pb.PublishToChannelRequest(
                    flow_id="c", messages=[pb.ChannelMessage(channel_name="q", value=pb.Value(int_value=1))]
                )
            )
            state = await stub.GetFlowState(pb.GetFlowStateRequest(flow_id="c"))
            assert [(kv.key, kv.value.string_value) for kv in state.attributes] == [("k", "v")]
            (queued,) = state.pending_channel_messages["q"].messages
            with pytest.raises(grpc.aio.AioRpcError) as missing:
                await stub.DeleteChannelMessage(
                    pb.DeleteChannelMessageRequest(flow_id="c", channel_name="q", message_id="nope")
                )
            assert missing.value.code() == grpc.StatusCode.NOT_FOUND
            await stub.DeleteChannelMessage(
                pb.DeleteChannelMessageRequest(flow_id="c", channel_name="q", message_id=queued.message_id)
            )
            state = await stub.GetFlowState(pb.GetFlowStateRequest(flow_id="c"))
            assert "q" not in state.pending_channel_messages
    finally:
        await server.stop()
