"""In-process checks of FlowService calls that need no Worker."""

import asyncio
import sqlite3
import time
from pathlib import Path
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


async def test_blob_references_from_a_client_are_refused_and_the_flow_stays_usable() -> None:
    server = DevServer(ServerOptions(port=0))
    await server.start()
    forged = pb.Value(internal_blob_id_for_string_value="s-" + "0" * 64)
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub: Any = pbg.FlowServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.StartFlow(
                    pb.StartFlowRequest(
                        flow_id="b", flow_type="T", request_id="r", start_step_type="S", step_input=forged
                    )
                )
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "start input is a blob reference" in (refused.value.details() or "")
            await stub.StartFlow(pb.StartFlowRequest(flow_id="b", flow_type="T", request_id="r"))
            attempts = {
                "attribute 'k'": stub.SetAttributes(
                    pb.SetAttributesRequest(
                        flow_id="b", attributes=[pb.AttributeWrite(key="k", value=forged)]
                    )
                ),
                "channel 'q'": stub.PublishToChannel(
                    pb.PublishToChannelRequest(
                        flow_id="b", messages=[pb.ChannelMessage(channel_name="q", value=forged)]
                    )
                ),
                "Stream 's'": stub.WriteStream(
                    pb.WriteStreamRequest(
                        flow_type="T",
                        flow_id="b",
                        stream_name="s",
                        source="x",
                        stream_capacity_bytes=100,
                        value=forged,
                    )
                ),
                "RPC 'r'": stub.InvokeRPC(pb.InvokeRPCRequest(flow_id="b", rpc_name="r", input=forged)),
            }
            for what, call in attempts.items():
                with pytest.raises(grpc.aio.AioRpcError) as error:
                    await call
                assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT, what
                assert what in (error.value.details() or "") and "blob reference" in (
                    error.value.details() or ""
                )
            # Nothing was applied, and the Flow takes ordinary writes.
            await stub.SetAttributes(
                pb.SetAttributesRequest(
                    flow_id="b", attributes=[pb.AttributeWrite(key="k", value=pb.Value(int_value=3))]
                )
            )
            state = await stub.GetFlowState(pb.GetFlowStateRequest(flow_id="b"))
            assert [(kv.key, kv.value.int_value) for kv in state.attributes] == [("k", 3)]
            assert not state.pending_channel_messages
    finally:
        await server.stop()


async def test_load_blobs_serves_a_blob_only_to_the_flow_that_owns_it() -> None:
    server = DevServer(ServerOptions(port=0))
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub: Any = pbg.FlowServiceStub(channel)
            for flow_id in ("owner", "other"):
                await stub.StartFlow(pb.StartFlowRequest(flow_id=flow_id, flow_type="T", request_id="r"))
            secret = pb.Value(string_value="secret " * 500)
            await stub.SetAttributes(
                pb.SetAttributesRequest(
                    flow_id="owner", attributes=[pb.AttributeWrite(key="k", value=secret)]
                )
            )
            got = await stub.GetAttributes(pb.GetAttributesRequest(flow_id="owner", keys=["k"]))
            reference = got.attributes[0].value
            blob_id = reference.internal_blob_id_for_string_value
            assert blob_id

            async def load(flow_id: str) -> dict[str, pb.Value]:
                entry = pb.LoadBlobRequestEntry(flow_id=flow_id, blob_value=reference)
                return dict((await stub.LoadBlobs(pb.LoadBlobsRequest(entries=[entry]))).values)

            assert await load("owner") == {blob_id: secret}
            assert await load("other") == {}
    finally:
        await server.stop()


@pytest.mark.parametrize("token", ["²", "١٢", "1" * 40, "-1", " 7"])
async def test_page_and_resume_tokens_that_the_devserver_did_not_issue_are_refused(token: str) -> None:
    server = DevServer(ServerOptions(port=0))
    await server.start()
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub: Any = pbg.FlowServiceStub(channel)
            run_id = (
                await stub.StartFlow(pb.StartFlowRequest(flow_id="t", flow_type="T", request_id="r"))
            ).run_id
            calls = [
                stub.ReadStream(
                    pb.ReadStreamRequest(flow_type="T", flow_id="t", stream_name="s", resume_token=token)
                ),
                stub.ListStreamMessages(
                    pb.ListStreamMessagesRequest(
                        flow_type="T", flow_id="t", stream_name="s", before_page_token=token
                    )
                ),
                stub.GetHistoryEvents(
                    pb.GetHistoryEventsRequest(flow_id="t", run_id=run_id, next_page_token=token.encode())
                ),
            ]
            for call in calls:
                with pytest.raises(grpc.aio.AioRpcError) as error:
                    await call
                assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                assert "is not a devserver token" in (error.value.details() or "")
            page = await stub.GetHistoryEvents(pb.GetHistoryEventsRequest(flow_id="t", run_id=run_id))
            assert len(page.events) == 1
    finally:
        await server.stop()


async def test_a_failed_commit_is_rolled_back_reported_and_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "s.sqlite3"
    server = DevServer(ServerOptions(port=0, db_path=str(path)))
    await server.start()
    server.store.execute_script(
        "CREATE TEMP TRIGGER refuse BEFORE INSERT ON history WHEN NEW.flow_id = 'poison'"
        " BEGIN SELECT RAISE(ABORT, 'disk full'); END;"
    )
    start = pb.StartFlowRequest(flow_id="poison", flow_type="T", request_id="r")
    start.flow_start_options.flow_already_started_options.ignore_already_started_error = True
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub: Any = pbg.FlowServiceStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await stub.StartFlow(start)
            assert error.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "could not commit" in (error.value.details() or "") and "disk full" in (
                error.value.details() or ""
            )
            # Rolled back: no row of the run reached the file.
            with sqlite3.connect(path) as db:
                assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
            db.close()
            # A full disk fails every retry alike: the log says so in one line each, with no traceback.
            failures = [
                record for record in caplog.records if record.getMessage().startswith("commit failed")
            ]
            assert failures and all(record.exc_info is None for record in failures), failures
            assert "(disk full)" in failures[0].getMessage()
            server.store.execute_script("DROP TRIGGER refuse;")
            # The change was kept and its commit is retried; the client's retry finds the same run.
            deadline = time.monotonic() + 20
            while server.store.has_staged:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            first = await stub.StartFlow(start)
            summary = await stub.GetFlowSummary(pb.GetFlowSummaryRequest(flow_id="poison"))
            assert summary.flow_execution_id.run_id == first.run_id
            await stub.SetAttributes(
                pb.SetAttributesRequest(
                    flow_id="poison", attributes=[pb.AttributeWrite(key="k", value=pb.Value(int_value=1))]
                )
            )
    finally:
        await server.stop()
    reopened = DevServer(ServerOptions(port=0, db_path=str(path)))
    await reopened.start()
    try:
        history = reopened.history_json("poison")
        assert [event["eventId"] for event in history["events"]] == ["1", "2"]
        assert reopened.engine.live["poison"].attributes["k"] == pb.Value(int_value=1)
    finally:
        await reopened.stop()
