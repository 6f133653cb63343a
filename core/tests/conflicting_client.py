"""An AsyncClient whose first calls of one RPC fail as a server fails them: a held lock, a Worker gone."""

from collections.abc import Callable, Sequence
from typing import Any

import grpc
from dex import (
    AsyncClient,
    BlobCacheConfig,
    ClientOptions,
    ErrorSubStatus,
    Registry,
    RpcLockConflictError,
    WorkerInvocationError,
    WorkerTarget,
    open_blob_cache,
)

from dex_agents import AgentSessionFlow, agent_codec_registry
from dex_agents.testing import AgentTestStack


def worker_disconnected(rpc_name: str, flow_id: str) -> WorkerInvocationError:
    """The error a server answers when the Worker running an RPC went away during it."""
    return WorkerInvocationError(
        grpc.StatusCode.FAILED_PRECONDITION,
        ErrorSubStatus.WORKER_API_ERROR,
        f"RPC {rpc_name!r} failed: the pull Worker disconnected during the rpc task",
        "invoke_rpc",
        flow_id,
        None,
        "WORKER_DISCONNECTED",
        "the pull Worker disconnected during the rpc task",
    )


def lock_conflict(rpc_name: str, flow_id: str) -> RpcLockConflictError:
    """The error a server answers when a Step holds a lock the RPC needs."""
    return RpcLockConflictError(
        grpc.StatusCode.ABORTED,
        ErrorSubStatus.WORKER_API_ERROR,
        f"a lock of {rpc_name} is held",
        "invoke_rpc",
        flow_id,
    )


class ConflictingClient(AsyncClient):
    """Raises ``error`` (a lock conflict) for the first ``conflicts`` calls of ``rpc_name``, then calls."""

    def __init__(
        self,
        stack: AgentTestStack,
        flows: Sequence[AgentSessionFlow],
        conflicts: int,
        rpc_name: str = "resolve_interrupt",
        error: Callable[[str, str], Exception] = lock_conflict,
    ) -> None:
        cache = open_blob_cache(
            BlobCacheConfig(str(stack.state_dir / f"conflict-cache-{rpc_name}-{conflicts}"), 16 * 1024 * 1024)
        )
        super().__init__(
            Registry(list(flows), codec_registry=agent_codec_registry(), allow_async_handlers=True),
            cache,
            ClientOptions(server_address=stack.server_address, worker_target=WorkerTarget(pull=True)),
        )
        self.rpc_name = rpc_name
        self.error = error
        self.conflicts_left = conflicts
        self.calls = 0

    async def invoke_rpc(self, *args: Any, **kwargs: Any) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        if getattr(args[0], "__name__", "") == self.rpc_name:
            self.calls += 1
            if self.conflicts_left > 0:
                self.conflicts_left -= 1
                raise self.error(self.rpc_name, str(args[1]))
        return await super().invoke_rpc(*args, **kwargs)
