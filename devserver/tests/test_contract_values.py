"""Blob offload of large values, and the value-size limit.

Spec: the issue's "Values" item (offload above 1 KiB, stored once, references hydrated through
LoadBlobs and cached; refusal above ``--max-value-bytes`` with an error that names the value) and
../shared/dex/sdk-1.23-and-wire-protocol.md §3.5.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from conftest import MAX_VALUE_BYTES
from contract import flows_values as values
from contract.processes import Mode
from contract.sandbox import Event, Sandbox
from dex import Client, DexServiceError, FlowNotFoundError, WorkerInvocationError

LIMIT = MAX_VALUE_BYTES
WAIT = timedelta(seconds=30)
BIG = "0123456789abcdef" * 512 + "tail"  # 8 KiB: well above the 1 KiB offload threshold
SMALL = "s" * 100  # below the threshold: stays inline
OVERSIZED = "o" * (LIMIT + 1024)


def worker_puts(sandbox: Sandbox, flow_id: str) -> list[Event]:
    return [e for e in sandbox.events(flow_id, "blob_put") if e.data["owner"] == "worker"]


def test_large_attribute_reaches_worker_as_blob_reference(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    client.start_flow(values.BLOBS, flow_id, "hold")
    client.invoke_rpc(values.BLOBS.set_values, flow_id, {"big": BIG, "small": SMALL})
    before = {str(e.data["blob"]) for e in worker_puts(sandbox, flow_id)}
    client.invoke_rpc(values.BLOBS.read_in_step, flow_id)
    client.invoke_rpc(values.BLOBS.read_in_step, flow_id)
    reads = sandbox.wait_for_event(flow_id, "read_big", count=2)
    # Each handler read the full value, though the request carried only a reference.
    for read in reads:
        assert read.data == {"length": len(BIG), "digest": values.digest(BIG), "small": SMALL}
    new_blobs = {str(e.data["blob"]) for e in worker_puts(sandbox, flow_id)} - before
    # Exactly one value was offloaded (the big one, once); the small one travelled inline.
    assert len(new_blobs) == 1, new_blobs
    (blob,) = new_blobs
    # Later requests carried the same reference, so the Worker's cache answered them.
    hits = [
        e for e in sandbox.events(flow_id, "blob_get") if e.data["blob"] == blob and e.data["hit"] is True
    ]
    assert hits, "no later request reused the stored blob reference"
    # The Client hydrates a large RPC output through LoadBlobs in the same way.
    assert client.invoke_rpc(values.BLOBS.get_big, flow_id) == BIG
    assert [e for e in sandbox.events(flow_id, "blob_put") if e.data["owner"] == "client"]
    client.stop_flow(flow_id)


def test_large_step_input_and_flow_output_are_offloaded(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    payload = "large step input " * 200
    client.start_flow(values.BLOBS, flow_id, "hold")
    client.invoke_rpc(values.BLOBS.echo, flow_id, payload)
    result = client.wait_for_flow(flow_id, timeout=WAIT)
    assert result.single_output(str) == payload
    (echoed,) = sandbox.events(flow_id, "echo_input")
    assert echoed.data == {"length": len(payload), "digest": values.digest(payload)}
    # The Worker hydrated the Step input, and the Client hydrated the Flow output, from references.
    owners = {str(e.data["owner"]) for e in sandbox.events(flow_id, "blob_put")}
    assert owners == {"worker", "client"}


def assert_names_limit(error: DexServiceError, *names: str) -> None:
    detail = f"{error.detail} {error}"
    assert re.search(r"too large|exceed|limit", detail, re.IGNORECASE), detail
    assert str(LIMIT) in detail or "max-value-bytes" in detail, detail
    for name in names:
        assert name in detail.lower(), (name, detail)


def test_start_input_over_limit_is_refused(mode: Mode, client: Client, flow_id: str) -> None:
    with pytest.raises(DexServiceError) as raised:
        client.start_flow(values.BLOBS, flow_id, OVERSIZED)
    assert_names_limit(raised.value, "input")
    with pytest.raises(FlowNotFoundError):
        client.describe_flow(flow_id)


def test_rpc_input_over_limit_is_refused_and_changes_nothing(
    mode: Mode, client: Client, flow_id: str
) -> None:
    client.start_flow(values.BLOBS, flow_id, "hold")
    client.invoke_rpc(values.BLOBS.set_values, flow_id, {"big": BIG, "small": SMALL})
    with pytest.raises(DexServiceError) as raised:
        client.invoke_rpc(values.BLOBS.set_values, flow_id, {"big": OVERSIZED, "small": SMALL})
    assert not isinstance(raised.value, WorkerInvocationError), "refused by the server, not by the Worker"
    assert_names_limit(raised.value, "input")
    assert client.invoke_rpc(values.BLOBS.get_big, flow_id) == BIG
    client.stop_flow(flow_id)


def test_step_attribute_over_limit_fails_the_attempt(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    client.start_flow(values.BLOBS, flow_id, "hold")
    client.invoke_rpc(values.BLOBS.set_values, flow_id, {"big": BIG, "small": SMALL})
    client.invoke_rpc(values.BLOBS.grow, flow_id, LIMIT + 1024)
    (rescued,) = sandbox.wait_for_event(flow_id, "rescued")
    assert rescued.data["origin"] == "Grower-1"
    detail = str(rescued.data["detail"])
    assert re.search(r"too large|exceed|limit", detail, re.IGNORECASE), detail
    # The error names the Attribute that was too large.
    assert "big" in detail, detail
    assert client.invoke_rpc(values.BLOBS.get_big, flow_id) == BIG
    client.stop_flow(flow_id)


def test_a_stream_write_over_limit_from_a_step_fails_the_attempt(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    client.start_flow(values.BLOBS, flow_id, "hold")
    client.invoke_rpc(values.BLOBS.flood, flow_id, LIMIT + 1024)
    (rescued,) = sandbox.wait_for_event(flow_id, "rescued")
    assert rescued.data["origin"] == "Flooder-1"
    detail = str(rescued.data["detail"])
    assert "a write to Stream 'bulletin'" in detail and "above the devserver limit" in detail, detail
    assert len(sandbox.events(flow_id, "flood_attempt")) == 1
    # Neither the oversized write nor what the attempt wrote after it was kept.
    assert list(client.list_stream_messages(flow_id, values.bulletin, 10).messages) == []
    client.stop_flow(flow_id)
