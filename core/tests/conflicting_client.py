"""An AsyncClient whose first calls of one RPC meet a held lock, as when a Step holds the lock then."""

from collections.abc import Sequence
from typing import Any

import grpc
from dex import (
    AsyncClient,
    BlobCacheConfig,
    ClientOptions,
    ErrorSubStatus,
    Registry,
    RpcLockConflictError,
    WorkerTarget,
    open_blob_cache,
)

from dex_agents import AgentSessionFlow, agent_codec_registry
from dex_agents.testing import AgentTestStack


class ConflictingClient(AsyncClient):
    """Raises `RpcLockConflictError` for the first ``conflicts`` calls of ``rpc_name``, then calls."""

    def __init__(
        self,
        stack: AgentTestStack,
        flows: Sequence[AgentSessionFlow],
        conflicts: int,
        rpc_name: str = "resolve_interrupt",
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
        self.conflicts_left = conflicts
        self.calls = 0

    async def invoke_rpc(self, *args: Any, **kwargs: Any) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        if getattr(args[0], "__name__", "") == self.rpc_name:
            self.calls += 1
            if self.conflicts_left > 0:
                self.conflicts_left -= 1
                raise RpcLockConflictError(
                    grpc.StatusCode.ABORTED,
                    ErrorSubStatus.WORKER_API_ERROR,
                    f"a lock of {self.rpc_name} is held",
                    "invoke_rpc",
                    str(args[1]),
                )
        return await super().invoke_rpc(*args, **kwargs)
