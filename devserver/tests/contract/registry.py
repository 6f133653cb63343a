"""The one Registry shared by the test process (Client) and the Worker child."""

from __future__ import annotations

from dex import Registry

from . import (
    flows_conditions,
    flows_durability,
    flows_failures,
    flows_history,
    flows_lifecycle,
    flows_state,
    flows_streams,
    flows_sync,
    flows_values,
)


def build_registry(role: str) -> Registry:
    """``role`` is ``client`` in the test process; the Worker child differs only where a test needs it.

    The ``sync`` role is the sync ``Worker``: it serves only the Flows with synchronous handlers, and
    the AsyncWorker roles leave those out (a pull Worker must not register a Flow type it cannot run).
    """
    if role == "sync":
        return Registry(flows_sync.FLOWS)
    sync_flows = flows_sync.FLOWS if role == "client" else ()
    flows = (
        *sync_flows,
        *flows_lifecycle.FLOWS,
        *flows_conditions.FLOWS,
        *flows_failures.flows(role),
        *flows_state.FLOWS,
        *flows_streams.FLOWS,
        *flows_values.FLOWS,
        *flows_durability.FLOWS,
        *flows_history.FLOWS,
    )
    return Registry(flows, allow_async_handlers=True)
