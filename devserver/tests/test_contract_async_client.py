"""The SDK's ``AsyncClient`` against the devserver (the other tests use the sync ``Client``).

Spec: the issue ("the unchanged AsyncClient/Client ... must work against it") and
../shared/dex/sdk-1.23-and-wire-protocol.md §1.11.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from conftest import client_registry, worker_target
from contract import flows_lifecycle as lifecycle
from contract import flows_streams as streams
from contract.blobs import RecordingBlobCache
from contract.processes import DevServer, Mode, WorkerProcess
from contract.sandbox import Sandbox
from dex import (
    AsyncClient,
    ClientOptions,
    FlowAlreadyStartedError,
    FlowNotActiveOrNotFoundError,
    FlowStatus,
    LongPollTimeoutError,
    StopFlowOptions,
    StopType,
)

WAIT = timedelta(seconds=30)


async def test_async_client_round_trip(
    mode: Mode, devserver: DevServer, worker: WorkerProcess, sandbox: Sandbox, flow_id: str
) -> None:
    options = ClientOptions(server_address=devserver.address, worker_target=worker_target(mode, worker))
    client = AsyncClient(client_registry(), RecordingBlobCache(sandbox, "client"), options)
    try:
        assert await client.health_check()
        await client.start_flow(lifecycle.PARKED, flow_id, "async")
        with pytest.raises(FlowAlreadyStartedError):
            await client.start_flow(lifecycle.PARKED, flow_id, "async")
        with pytest.raises(LongPollTimeoutError):
            await client.wait_for_flow(flow_id, timeout=timedelta(seconds=1))
        assert await client.invoke_rpc(lifecycle.PARKED.release, flow_id, "go") is True
        result = await client.wait_for_flow(flow_id, timeout=WAIT)
        assert result.status is FlowStatus.COMPLETED
        assert result.single_output(str) == "async:go"

        streamed = f"{flow_id}-stream"
        await client.start_flow(streams.STREAMS, streamed, 1)
        message = await client.read_stream(streamed, streams.progress, "", timeout=WAIT)
        assert (message.value, message.source) == ("s0", "#Writer-1")
        await client.stop_flow(streamed, StopFlowOptions(type=StopType.TERMINATE))
        assert (await client.wait_for_flow(streamed, timeout=WAIT)).status is FlowStatus.TERMINATED

        with pytest.raises(FlowNotActiveOrNotFoundError):
            await client.invoke_rpc(lifecycle.PARKED.release, f"missing-{uuid.uuid4().hex}", "x")
    finally:
        await client.close()
