"""Streams written by Steps: resume tokens, long polls, trimming, newest-first pages.

Spec: ../shared/dex/sdk-1.23-and-wire-protocol.md §1.9, §3.1, §3.4 (stream writes) and the SDK
README (Stream pages).
"""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from contract import flows_streams as streams
from contract.processes import Mode
from contract.sandbox import Sandbox
from dex import Client, FlowStatus, LongPollTimeoutError, Stream, StreamMessage

POLL = timedelta(seconds=15)
WAIT = timedelta(seconds=30)


def test_step_writes_and_resume_after_a_gap(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    client.start_flow(streams.STREAMS, flow_id, 3)
    sandbox.wait_for_event(flow_id, "first_batch")
    first = client.read_stream(flow_id, streams.progress, "", timeout=POLL)
    assert (first.value, first.source) == ("s0", "#Writer-1")
    second = client.read_stream(flow_id, streams.progress, first.resume_token, timeout=POLL)
    third = client.read_stream(flow_id, streams.progress, second.resume_token, timeout=POLL)
    assert [second.value, third.value] == ["s1", "s2"]
    # Nothing after s2 yet: a long poll ends with LongPollTimeoutError.
    with pytest.raises(LongPollTimeoutError):
        client.read_stream(flow_id, streams.progress, third.resume_token, timeout=timedelta(seconds=1))
    # A poll started before the Step writes again returns that write once it arrives.
    woken: list[StreamMessage[str]] = []
    poller = threading.Thread(
        target=lambda: woken.append(
            client.read_stream(flow_id, streams.progress, third.resume_token, timeout=POLL)
        )
    )
    poller.start()
    sandbox.open_gate(flow_id, "more")
    poller.join(timeout=POLL.total_seconds() + 5)
    assert [m.value for m in woken] == ["s3"]
    last = client.read_stream(flow_id, streams.progress, woken[0].resume_token, timeout=POLL)
    assert (last.value, last.source) == ("s4", "#Writer-1")
    assert client.wait_for_flow(flow_id, timeout=WAIT).status is FlowStatus.COMPLETED
    # Resuming from an old token after the gap still continues right after it.
    again = client.read_stream(flow_id, streams.progress, first.resume_token, timeout=POLL)
    assert again.value == "s1"


def all_pages(client: Client, flow_id: str, stream: Stream[str], page_size: int) -> list[list[str]]:
    pages: list[list[str]] = []
    token = ""
    for _ in range(100):
        page = client.list_stream_messages(flow_id, stream, page_size, token)
        pages.append([m.value for m in page.messages])
        if not page.next_page_token:
            return pages
        token = page.next_page_token
    raise AssertionError("ListStreamMessages never returned an empty next_page_token")


def test_list_stream_messages_newest_first(
    mode: Mode, client: Client, sandbox: Sandbox, flow_id: str
) -> None:
    client.start_flow(streams.STREAMS, flow_id, 3)
    sandbox.wait_for_event(flow_id, "first_batch")
    sandbox.open_gate(flow_id, "more")
    # Stream frames precede the Step's result on the same call, so completion implies all five are stored.
    assert client.wait_for_flow(flow_id, timeout=WAIT).status is FlowStatus.COMPLETED
    assert all_pages(client, flow_id, streams.progress, 2) == [["s4", "s3"], ["s2", "s1"], ["s0"]]


def test_stream_capacity_trims_oldest(mode: Mode, client: Client, flow_id: str) -> None:
    client.start_flow(streams.TINY_STREAM, flow_id, 30)
    assert client.wait_for_flow(flow_id, timeout=WAIT).status is FlowStatus.COMPLETED
    (retained,) = all_pages(client, flow_id, streams.tiny, 100)
    written = [f"t{index:02d}" for index in range(30)]
    # A 64-byte budget cannot hold 30 messages: the oldest went, the newest stayed, order kept.
    assert 0 < len(retained) < len(written)
    assert retained == list(reversed(written))[: len(retained)]
    oldest = client.read_stream(flow_id, streams.tiny, "", timeout=POLL)
    assert oldest.value == retained[-1]


def test_client_writes_need_no_flow(mode: Mode, client: Client, flow_id: str) -> None:
    # Streams are keyed by Flow type and ID and are independent of whether that Flow exists.
    client.write_stream(flow_id, streams.progress, "frontend#preview", "from the client")
    client.write_stream(flow_id, streams.progress, "frontend#preview", "again")
    first = client.read_stream(flow_id, streams.progress, "", timeout=POLL)
    assert (first.value, first.source) == ("from the client", "frontend#preview")
    second = client.read_stream(flow_id, streams.progress, first.resume_token, timeout=POLL)
    assert (second.value, second.source) == ("again", "frontend#preview")
    assert second.created_time >= first.created_time
