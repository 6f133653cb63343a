"""Attributes and AttributeMap loading, locks, transactional RPCs, RPC next steps and queries.

Spec: ../shared/dex/sdk-1.23-and-wire-protocol.md §1.5, §1.8, §3.6 (6-8), the SDK README
"Flow state I/O" / "RPC state loading", and server-semantics.md §7.4, §9.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar, cast

import grpc
import pytest
from contract import flows_state as state
from contract.flows_state import Snapshot
from contract.processes import DevServer, Mode
from contract.sandbox import Sandbox
from dex import (
    AttributeMatch,
    ChannelMessageNotFoundError,
    Client,
    FlowNotActiveOrNotFoundError,
    FlowStatus,
    RPCInvokeOptions,
    RpcLockConflictError,
    WaitForAttributeOptions,
    WorkerInvocationError,
)
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc

WAIT = timedelta(seconds=30)
T = TypeVar("T")


def started(client: Client, flow_id: str) -> str:
    return client.start_flow(state.STATE, flow_id, None)


def test_selective_loading_of_attribute_map_instances(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    started(client, flow_id)
    client.invoke_rpc(state.STATE.add_notes, flow_id, {"a": "note a", "b": "note b"})
    client.invoke_rpc(state.STATE.read_one, flow_id, "a")
    (read,) = sandbox.wait_for_event(flow_id, "read")
    # The movement loaded only instance "a": "b" exists but this Step cannot read it.
    assert read.data == {"loaded": "note a", "unloaded": "AttributeMapNotLoadedError"}
    client.invoke_rpc(state.STATE.read_all, flow_id)
    (read_all,) = sandbox.wait_for_event(flow_id, "read_all")
    assert read_all.data == {"keys": ["a", "b"], "values": ["note a", "note b"]}
    client.stop_flow(flow_id)


def test_selective_loading_of_channel_map_instances(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    started(client, flow_id)
    client.invoke_rpc(state.STATE.send_mail, flow_id, {"inbox-a": "hello a", "other": "hello other"})
    client.invoke_rpc(state.STATE.read_mail, flow_id, "inbox-a")
    (read,) = sandbox.wait_for_event(flow_id, "read_mail")
    assert read.data == {"loaded": ["hello a"], "unloaded": "ChannelMessagesNotLoadedError"}
    client.stop_flow(flow_id)


def retry_while_locked(call: Callable[[], T], timeout: float = 20.0) -> T:
    """After a holder's execute returns, its lock is released when the result is applied; poll for that."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except RpcLockConflictError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def test_attribute_lock_conflicts_and_waiting(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    started(client, flow_id)
    client.invoke_rpc(state.STATE.start_holder, flow_id)
    sandbox.wait_for_event(flow_id, "holder_start")
    client.invoke_rpc(state.STATE.start_waiter, flow_id)
    # An RPC never waits for a lock: it fails fast while the Step holds the key.
    with pytest.raises(RpcLockConflictError):
        client.invoke_rpc(state.STATE.bump, flow_id, 5)
    assert sandbox.events(flow_id, "waiter_start") == []
    sandbox.open_gate(flow_id, "release")
    # A Step waits for the key instead, and its snapshot is taken after it acquired the lock.
    (waiter,) = sandbox.wait_for_event(flow_id, "waiter_start")
    kinds = [e.kind for e in sandbox.events(flow_id) if e.kind in ("holder_end", "waiter_start")]
    assert kinds == ["holder_end", "waiter_start"]
    assert waiter.data["balance"] == 10
    assert retry_while_locked(lambda: client.invoke_rpc(state.STATE.bump, flow_id, 5)) == 16
    client.stop_flow(flow_id)


def test_attribute_map_instance_locks_are_per_instance(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    started(client, flow_id)
    client.invoke_rpc(state.STATE.start_map_holder, flow_id)
    sandbox.wait_for_event(flow_id, "map_holder_start")

    def write(instance: str) -> bool:
        options = RPCInvokeOptions(lock_attribute_map_instances=(state.notes.lock(instance),))
        return client.invoke_rpc(state.STATE.write_note, flow_id, {instance: "written"}, options=options)

    # The Step holds notes/a only: another instance of the same map is free.
    assert write("b") is True
    with pytest.raises(RpcLockConflictError):
        write("a")
    sandbox.open_gate(flow_id, "release-map")
    assert retry_while_locked(lambda: write("a")) is True
    client.stop_flow(flow_id)


def test_transactional_rpc_delete_of_missing_message_aborts_all_writes(
    mode: Mode, client: Client, flow_id: str
) -> None:
    started(client, flow_id)
    client.invoke_rpc(state.STATE.push, flow_id, ["q1", "q2"])
    ids = client.invoke_rpc(state.STATE.pending_ids, flow_id)
    assert len(ids) == 2
    # Server-assigned message IDs are UUIDv7.
    assert all(uuid.UUID(message_id).version == 7 for message_id in ids)
    with pytest.raises(ChannelMessageNotFoundError):
        client.invoke_rpc(state.STATE.write_and_delete, flow_id, str(uuid.uuid4()))
    # Nothing of the failed transaction was applied: no Attribute write, no publish, no delete.
    assert client.invoke_rpc(state.STATE.snapshot, flow_id) == Snapshot(None, 0, 2, 0)
    client.invoke_rpc(state.STATE.write_and_delete, flow_id, ids[0])
    assert client.invoke_rpc(state.STATE.snapshot, flow_id) == Snapshot("written", 0, 1, 1)
    assert client.invoke_rpc(state.STATE.pending_values, flow_id) == ["q2"]
    client.stop_flow(flow_id)


def test_rpc_next_steps_and_query_on_closed_flow(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    started(client, flow_id)
    client.invoke_rpc(state.STATE.set_marker, flow_id, "kept")
    client.invoke_rpc(state.STATE.schedule_echo, flow_id, "from rpc")
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED
    assert {c.step_execution_id: c.decode(str) for c in result.completions} == {"Echo-1": "from rpc"}
    (echo,) = sandbox.events(flow_id, "echo")
    assert echo.data["value"] == "from rpc"
    # An RPC without locks, transaction or effects is a query: a closed Flow still answers it.
    assert client.invoke_rpc(state.STATE.read_marker, flow_id) == "kept"
    # An RPC with an effect, a lock or a transaction needs a running Flow.
    with pytest.raises(FlowNotActiveOrNotFoundError):
        client.invoke_rpc(state.STATE.set_marker, flow_id, "too late")
    with pytest.raises(FlowNotActiveOrNotFoundError):
        client.invoke_rpc(state.STATE.bump, flow_id, 1)
    with pytest.raises(FlowNotActiveOrNotFoundError):
        client.invoke_rpc(state.STATE.write_and_delete, flow_id, str(uuid.uuid4()))
    assert client.invoke_rpc(state.STATE.read_marker, flow_id) == "kept"


def test_rpc_cancels_running_async_execute(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    started(client, flow_id)
    client.invoke_rpc(state.STATE.schedule_long, flow_id)
    sandbox.wait_for_event(flow_id, "long_started")
    client.invoke_rpc(state.STATE.interrupt, flow_id, "after interrupt")
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.status is FlowStatus.COMPLETED
    assert result.single_output(str) == "after interrupt"
    # The running coroutine saw asyncio.CancelledError and never finished.
    sandbox.wait_for_event(flow_id, "long_cancelled")
    assert sandbox.events(flow_id, "long_finished") == []


def test_rpc_cancellation_precedes_its_next_steps(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    started(client, flow_id)
    client.invoke_rpc(state.STATE.schedule_long, flow_id)
    sandbox.wait_for_event(flow_id, "long_started")
    client.invoke_rpc(state.STATE.restart_long, flow_id)
    (cancelled,) = sandbox.wait_for_event(flow_id, "long_cancelled")
    assert cancelled.step == "Long-1"
    (restarted,) = sandbox.wait_for_event(flow_id, "long_started", where=lambda e: e.step != "Long-1")
    assert restarted.step == "Long-2"
    client.stop_flow(flow_id)
    # Long-2 is cancelled by the stop, not by the RPC that created it.
    sandbox.wait_for_event(flow_id, "long_cancelled", count=2)


def test_wait_for_attribute_match(mode: Mode, client: Client, flow_id: str) -> None:
    started(client, flow_id)
    client.invoke_rpc(state.STATE.set_marker, flow_id, "ready")
    options = WaitForAttributeOptions(request_timeout=timedelta(seconds=20))
    assert (
        client.wait_for_attribute_match(flow_id, state.marker, AttributeMatch[str].equal_to("ready"), options)
        == "ready"
    )
    client.stop_flow(flow_id)


def test_rpc_handler_failure_is_worker_invocation_error(mode: Mode, client: Client, flow_id: str) -> None:
    started(client, flow_id)
    with pytest.raises(WorkerInvocationError) as raised:
        client.invoke_rpc(state.STATE.explode, flow_id, "kaboom")
    assert raised.value.worker_error_type == "builtins.RuntimeError"
    assert "kaboom" in (raised.value.worker_error_detail or "")
    # The failed RPC had no effect.
    assert client.invoke_rpc(state.STATE.read_marker, flow_id) == ""
    client.stop_flow(flow_id)


def test_unknown_rpc_name_fails_with_a_named_error(
    mode: Mode, client: Client, devserver: DevServer, flow_id: str
) -> None:
    run_id = started(client, flow_id)
    # The SDK only calls registered RPCs, so this call goes through the generated stub.
    request = pb.InvokeRPCRequest(
        flow_id=flow_id,
        run_id=run_id,
        rpc_name="no_such_rpc",
        request_id=str(uuid.uuid4()),
        input=pb.Value(null_value="NULL_VALUE"),
    )
    with grpc.insecure_channel(devserver.address) as channel:
        stub: Any = dex_pb2_grpc.FlowServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.RpcError) as raised:
            stub.InvokeRPC(request, timeout=30)
    error = cast(grpc.Call, raised.value)
    # Push: the Worker fails the call. Pull: the Worker rejects the unknown name and, once the
    # dispatch wait is over, the caller gets the error. Either way the error names the RPC.
    assert error.code() is not grpc.StatusCode.DEADLINE_EXCEEDED
    assert "no_such_rpc" in str(error.details()), error.details()
    client.stop_flow(flow_id)
