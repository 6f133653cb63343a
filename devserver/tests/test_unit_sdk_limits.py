"""The SDK Client's 4 MiB receive limit against the devserver's default 2 MiB value limit (in-process)."""

# pyright: reportIncompatibleMethodOverride=false

from pathlib import Path

import dex
import pytest

from dex_devserver import DevServer, ServerOptions

MESSAGE_BYTES = 2 * 1024 * 1024 - 1024
log = dex.Stream("log", str, 64 * 1024 * 1024)


class Noop(dex.Step[None]):
    def execute(self, context: dex.Context, input: None) -> dex.StepDecision:
        return dex.dead_end()


class LogFlow(dex.Flow[None]):
    def get_steps(self) -> dex.StepList[None]:
        return dex.StepList[None].start_step(Noop())

    def get_persistence_schema(self) -> dex.PersistenceSchema:
        return dex.PersistenceSchema.of(log)


@pytest.fixture
def cache(tmp_path: Path) -> dex.BlobCache:
    return dex.open_blob_cache(dex.BlobCacheConfig(directory=str(tmp_path / "cache"), max_bytes=1024 * 1024))


async def test_stream_pages_of_two_mib_messages_stay_under_the_sdk_receive_limit(
    cache: dex.BlobCache,
) -> None:
    server = DevServer(ServerOptions(port=0))
    await server.start()
    try:
        registry = dex.Registry((LogFlow(),), allow_async_handlers=True)
        async with dex.AsyncClient(
            registry, cache, dex.ClientOptions(server_address=server.address)
        ) as client:
            for index in range(3):
                await client.write_stream("big-log", log, "test", str(index) * MESSAGE_BYTES)
            # Each page is received by the SDK (a page over 4 MiB would fail with RESOURCE_EXHAUSTED).
            seen: list[str] = []
            token = ""
            for _ in range(10):
                page = await client.list_stream_messages("big-log", log, 100, token)
                assert len(page.messages) == 1
                seen.extend(message.value[0] for message in page.messages)
                token = page.next_page_token
                if not token:
                    break
            assert seen == ["2", "1", "0"]
            first = await client.read_stream("big-log", log)
            assert first.value == "0" * MESSAGE_BYTES
    finally:
        await server.stop()
        cache.close()
