"""Memory bounded by live work, restart cost, retention, and responses bounded by bytes (in-process)."""

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pbg

from dex_devserver import DevServer, ServerOptions
from dex_devserver import _flows as flows
from dex_devserver import _writes as writes
from dex_devserver._fit import RESPONSE_LIMIT

_RUN_TABLES = ("runs", "history", "attributes", "channel_messages", "results", "executions", "blobs")


async def _serve(path: Path, **options: Any) -> DevServer:
    server = DevServer(ServerOptions(port=0, db_path=str(path), **options))
    await server.start()
    return server


@contextlib.asynccontextmanager
async def serving(path: Path) -> AsyncIterator[tuple[Any, DevServer]]:
    server = await _serve(path)
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            yield pbg.FlowServiceStub(channel), server
    finally:
        await server.stop()


def _start(flow_id: str) -> pb.StartFlowRequest:
    return pb.StartFlowRequest(flow_id=flow_id, flow_type="T", request_id=f"start-{flow_id}")


async def test_restart_with_ten_thousand_closed_flows_loads_none_of_them(tmp_path: Path) -> None:
    server = await _serve(tmp_path / "s.sqlite3")
    for index in range(10_000):
        flows.start_flow(server.engine, _start(f"closed-{index}"))
        flows.stop_flow(server.engine, pb.StopFlowRequest(flow_id=f"closed-{index}", reason="done"))
        if index % 1000 == 999:
            await server.engine.journal.durable()
    flows.start_flow(server.engine, _start("open"))
    await server.engine.journal.durable()
    # Closed runs left memory once their close was committed.
    assert list(server.engine.live) == ["open"]
    await server.stop()

    restarted = await _serve(tmp_path / "s.sqlite3")
    try:
        assert restarted.restored == 1
        assert list(restarted.engine.live) == ["open"]
        async with grpc.aio.insecure_channel(restarted.address) as channel:
            stub: Any = pbg.FlowServiceStub(channel)
            # A closed run is read from the store when asked for.
            summary = await stub.GetFlowSummary(pb.GetFlowSummaryRequest(flow_id="closed-4321"))
            assert summary.flow_status == pb.FLOW_STATUS_CANCELED
            result = await stub.WaitForFlow(pb.WaitForFlowRequest(flow_id="closed-4321"))
            assert (result.flow_status, result.error_message) == (pb.FLOW_STATUS_CANCELED, "done")
            history = await stub.GetHistoryEvents(
                pb.GetHistoryEventsRequest(flow_id="closed-4321", run_id=summary.flow_execution_id.run_id)
            )
            assert [e.WhichOneof("payload") for e in history.events] == [
                "flow_started_or_continued",
                "flow_closed",
            ]
        assert list(restarted.engine.live) == ["open"]
    finally:
        await restarted.stop()


async def test_timed_out_long_polls_leave_no_waiter_behind(tmp_path: Path) -> None:
    async with serving(tmp_path / "s.sqlite3") as (stub, server):
        await _timed_out_long_polls_leave_no_waiter_behind(stub, server)


async def _timed_out_long_polls_leave_no_waiter_behind(stub: Any, server: DevServer) -> None:
    await stub.StartFlow(_start("quiet"))
    run = server.engine.live["quiet"]
    for _ in range(3):
        with pytest.raises(grpc.aio.AioRpcError) as flow_wait:
            await stub.WaitForFlow(pb.WaitForFlowRequest(flow_id="quiet", wait_time_seconds=1))
        assert flow_wait.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    match = pb.AttributeMatch(key="k", operand=pb.Value(int_value=1))
    with pytest.raises(grpc.aio.AioRpcError):
        await stub.WaitForAttribute(
            pb.WaitForAttributeRequest(flow_id="quiet", match=match, request_timeout_seconds=1)
        )
    with pytest.raises(grpc.aio.AioRpcError):
        await stub.ReadStream(
            pb.ReadStreamRequest(flow_type="T", flow_id="quiet", stream_name="s", wait_time_seconds=1)
        )
    assert (run.rt.watchers, run.rt.close_watchers) == ([], [])
    assert not server.streams._waiters  # pyright: ignore[reportPrivateUsage]


async def test_closed_runs_expire_after_the_retention(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    server = await _serve(path, retain_closed=0.5)
    try:
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub: Any = pbg.FlowServiceStub(channel)
            for flow_id in ("short-lived", "long-lived"):
                await stub.StartFlow(_start(flow_id))
                await stub.SetAttributes(
                    pb.SetAttributesRequest(
                        flow_id=flow_id,
                        attributes=[pb.AttributeWrite(key="big", value=pb.Value(string_value="b" * 5000))],
                    )
                )
            await stub.WriteStream(
                pb.WriteStreamRequest(
                    flow_type="T",
                    flow_id="short-lived",
                    stream_name="s",
                    source="test",
                    stream_capacity_bytes=1000,
                    value=pb.Value(int_value=1),
                )
            )
            await stub.StopFlow(pb.StopFlowRequest(flow_id="short-lived"))
            deadline = time.monotonic() + 30
            while True:
                try:
                    await stub.GetFlowSummary(pb.GetFlowSummaryRequest(flow_id="short-lived"))
                except grpc.aio.AioRpcError as error:
                    assert error.code() == grpc.StatusCode.NOT_FOUND
                    break
                assert time.monotonic() < deadline, "the closed run was never expired"
                await asyncio.sleep(0.1)
            running = await stub.GetFlowSummary(pb.GetFlowSummaryRequest(flow_id="long-lived"))
            assert running.flow_status == pb.FLOW_STATUS_RUNNING
    finally:
        await server.stop()
    with sqlite3.connect(path) as db:
        for table in _RUN_TABLES:
            flow_ids = {row[0] for row in db.execute(f"SELECT flow_id FROM {table}")}
            assert "short-lived" not in flow_ids, table
        assert db.execute("SELECT COUNT(*) FROM streams").fetchone()[0] == 0
        assert db.execute("SELECT COUNT(*) FROM attributes WHERE flow_id = 'long-lived'").fetchone()[0] == 1
    db.close()


async def test_history_pages_are_capped_in_events_and_bytes(tmp_path: Path) -> None:
    async with serving(tmp_path / "s.sqlite3") as (stub, server):
        await _history_pages_are_capped_in_events_and_bytes(stub, server)


async def _history_pages_are_capped_in_events_and_bytes(stub: Any, server: DevServer) -> None:
    run_id = (await stub.StartFlow(_start("busy"))).run_id
    # 1,200 small events, then 60 events of about 100 KB each.
    for index in range(1200):
        writes.set_attributes(
            server.engine,
            pb.SetAttributesRequest(
                flow_id="busy", attributes=[pb.AttributeWrite(key="n", value=pb.Value(int_value=index))]
            ),
        )
    for index in range(60):
        writes.set_attributes(
            server.engine,
            pb.SetAttributesRequest(
                flow_id="busy",
                attributes=[
                    pb.AttributeWrite(key=f"k{n}", value=pb.Value(string_value=f"{index:02d}" * 500))
                    for n in range(100)
                ],
            ),
        )
    await server.engine.journal.durable()
    sizes: list[int] = []
    token = b""
    while True:
        page = await stub.GetHistoryEvents(
            pb.GetHistoryEventsRequest(
                flow_id="busy", run_id=run_id, estimate_page_size=5000, next_page_token=token
            )
        )
        assert len(page.events) <= 1000
        assert page.ByteSize() < RESPONSE_LIMIT
        sizes.append(len(page.events))
        token = page.next_page_token
        if not token:
            break
    # The first page stops at 1,000 events; the 261 after it need two pages because of their bytes.
    assert sizes[0] == 1000 and sum(sizes) == 1 + 1200 + 60 and len(sizes) == 3


async def test_one_oversized_response_has_its_largest_values_offloaded(tmp_path: Path) -> None:
    async with serving(tmp_path / "s.sqlite3") as (stub, server):
        await _one_oversized_response_has_its_largest_values_offloaded(stub, server)


async def _one_oversized_response_has_its_largest_values_offloaded(stub: Any, server: DevServer) -> None:
    run_id = (await stub.StartFlow(_start("wide"))).run_id
    # 5,000 Attributes of 1,000 bytes each: small enough to stay inline one by one, 5 MB together.
    await stub.SetAttributes(
        pb.SetAttributesRequest(
            flow_id="wide",
            attributes=[
                pb.AttributeWrite(key=f"k{n:04d}", value=pb.Value(string_value=f"{n:04d}" * 250))
                for n in range(5000)
            ],
        )
    )
    state = await stub.GetFlowState(pb.GetFlowStateRequest(flow_id="wide"))
    attributes = await stub.GetAttributes(pb.GetAttributesRequest(flow_id="wide", all_keys=True))
    history = await stub.GetHistoryEvents(pb.GetHistoryEventsRequest(flow_id="wide", run_id=run_id))
    for response in (state, attributes, history):
        assert response.ByteSize() < RESPONSE_LIMIT
    (offloaded, *_) = [kv for kv in attributes.attributes if kv.value.WhichOneof("kind") != "string_value"]
    loaded = await stub.LoadBlobs(
        pb.LoadBlobsRequest(entries=[pb.LoadBlobRequestEntry(flow_id="wide", blob_value=offloaded.value)])
    )
    assert list(loaded.values.values()) == [pb.Value(string_value=offloaded.key[1:] * 250)]
    assert len(attributes.attributes) == 5000
    # The Flow is still usable.
    await stub.SetAttributes(
        pb.SetAttributesRequest(
            flow_id="wide", attributes=[pb.AttributeWrite(key="k0000", value=pb.Value(int_value=1))]
        )
    )
    assert server.engine.live["wide"].attributes["k0000"] == pb.Value(int_value=1)
