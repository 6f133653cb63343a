"""The `AsyncClient` a session client opens for itself, with the blob cache it owns."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

from dex import (
    AsyncClient,
    BlobCache,
    BlobCacheConfig,
    ClientOptions,
    Credential,
    Registry,
    WorkerTarget,
    open_blob_cache,
)

from dex_agents._codecs import agent_codec_registry
from dex_agents.session import AgentSessionFlow

__all__ = ["CLIENT_BLOB_CACHE_BYTES", "ClientConnection"]

CLIENT_BLOB_CACHE_BYTES = 64 * 1024 * 1024
"""The size of a client's blob cache on disk."""


class ClientConnection:
    """An `AsyncClient` for session Flows and the blob cache under it, closed together."""

    def __init__(
        self, client: AsyncClient, cache: BlobCache, temporary: tempfile.TemporaryDirectory[str] | None
    ) -> None:
        """Wrap an open client and its cache; `open` builds them."""
        self.client = client
        self._cache = cache
        self._temporary = temporary

    @classmethod
    def open(
        cls,
        server_address: str,
        flows: Sequence[AgentSessionFlow],
        blob_cache_directory: str | Path | None,
        credential: Credential | None,
    ) -> ClientConnection:
        """Open a client whose Registry holds ``flows`` with `agent_codec_registry()`, for pull Workers.

        Args:
            server_address: The Dex server, ``host:port``.
            flows: The session Flows the client calls.
            blob_cache_directory: Where large values are cached; `None` for a temporary directory that
                `close` removes.
            credential: The bearer credential for a server that requires one.

        Returns:
            The connection.
        """
        temporary = None
        if blob_cache_directory is None:
            temporary = tempfile.TemporaryDirectory(prefix="dex-agents-client-cache-")
            blob_cache_directory = temporary.name
        cache = open_blob_cache(BlobCacheConfig(str(blob_cache_directory), CLIENT_BLOB_CACHE_BYTES))
        client = AsyncClient(
            Registry(list(flows), codec_registry=agent_codec_registry(), allow_async_handlers=True),
            cache,
            # Sessions this client starts are dispatched to pull Workers, as AgentWorker serves them.
            ClientOptions(
                server_address=server_address, worker_target=WorkerTarget(pull=True), credential=credential
            ),
        )
        return cls(client, cache, temporary)

    async def close(self) -> None:
        """Close the client, then the cache and its temporary directory."""
        try:
            await self.client.close()
        finally:
            self._cache.close()
            if self._temporary is not None:
                self._temporary.cleanup()
