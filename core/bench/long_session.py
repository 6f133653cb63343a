"""How a turn's cost grows with a session's history, with and without compaction.

    uv run python -m bench.long_session [--sizes 64,1000,10000] [--turns 10] [--grow 120] [--chunk-size 32]
    uv run python -m bench.long_session --profile large [--sizes-mib 1,10,50] [--message-kib 100]
        [--blob-cache-mib 64]

One session per Flow (``bench.long_agent``: default storage options; one Flow also compacts) grows fast
(``grow <n>`` turns store ``n`` messages at once) to each size, then runs ``--turns`` measured turns of a
model call, a read tool and a model call. Per size it prints, as medians over those turns: the bytes the
Worker loaded from the server per ``RunModel`` (the request plus the blobs its cache lacked, logged by
``bench.long_worker``), the same for ``get_agent_snapshot`` and the snapshot's own size, the Worker's and
the devserver's CPU per turn, and the wall time per turn. Print the load average with the figures: other
work on the machine inflates wall time, not CPU time.

The large profile grows one session per Flow (``bench.long_agent.LargeRunner``: 100 KiB messages and tool
outputs, default storage options; one Flow also compacts) to each size in MiB of stored messages (their JSON,
runner items included, read back by paging). At each size it runs three measured turns on the warm Worker,
then SIGKILLs it and takes a snapshot, one turn and a page on a fresh Worker with an empty blob cache, and
prints the bytes each loaded, the Worker's and the devserver's resident memory, and the largest single
``LoadBlobs`` answer the devserver sent (it must stay below the SDK's 4 MiB).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path

from dex import LongPollTimeoutError
from dex_agents_bench import process_cpu_seconds
from dex_agents_bench._measure import resident_mib

from bench.long_agent import GROW_PREFIX, build_flows, build_large_flows
from bench.long_worker import CHUNK_SIZE_ENV, LOAD_LOG_ENV, MESSAGE_BYTES_ENV
from dex_agents import (
    AgentEventType,
    AgentSessionClient,
    AgentSessionFlow,
    AgentSessionStatus,
    AgentSnapshot,
    agent_codec_registry,
)
from dex_agents.testing import AgentTestStack

CORE_DIR = Path(__file__).resolve().parents[1]
_SNAPSHOT_CODEC = agent_codec_registry().resolve(AgentSnapshot)


@dataclass(frozen=True)
class Figures:
    """The medians at one session size."""

    appended: int
    stored: int
    run_model_bytes: float
    snapshot_bytes: float
    snapshot_size: int
    worker_cpu_ms: float
    devserver_cpu_ms: float
    wall_ms: float


class Session:
    """One benchmark session: its client, its event position and the Worker's load log."""

    def __init__(self, sessions: AgentSessionClient, session_id: str, load_log: Path) -> None:
        self.sessions = sessions
        self.session_id = session_id
        self.load_log = load_log
        self.token = ""
        self.started = False
        self.turns = 0

    async def turn(self, text: str) -> float:
        """Send ``text`` (starting the session the first time) and return the seconds to turn_completed."""
        started = time.perf_counter()
        self.turns += 1
        if self.started:
            await self.sessions.send_user_message(self.session_id, text)
        else:
            await self.sessions.start_session(self.session_id, text)
            self.started = True
        while True:
            try:
                message = await self.sessions.read_agent_event(
                    self.session_id, self.token, timeout=timedelta(seconds=10)
                )
            except LongPollTimeoutError:
                continue
            self.token = message.resume_token
            if message.value.type == AgentEventType.TURN_COMPLETED:
                return time.perf_counter() - started
            if message.value.type == AgentEventType.TURN_FAILED:
                raise RuntimeError(f"turn failed: {message.value.payload}")

    async def settled(self) -> AgentSnapshot:
        """The snapshot once every turn sent so far has committed.

        ``turn_completed`` is written while ``RunModel`` runs, a moment before its commit, so a snapshot
        read right after the event can miss the turn.
        """
        while True:
            snapshot = await self.sessions.get_agent_snapshot(self.session_id)
            state = snapshot.state
            if (
                state is not None
                and state.turn_count >= self.turns
                and state.status == AgentSessionStatus.WAITING_FOR_USER_MESSAGE
            ):
                return snapshot
            await asyncio.sleep(0.01)

    async def last_sequence(self) -> int:
        """The session's newest message once its turns committed, 0 before it starts."""
        if not self.started:
            return 0
        state = (await self.settled()).state
        return 0 if state is None else state.next_message_sequence - 1

    def log_position(self) -> int:
        """Where the Worker's load log ends now."""
        return self.load_log.stat().st_size if self.load_log.exists() else 0

    def loads_since(self, position: int, kind: str) -> list[int]:
        """The bytes loaded by each ``kind`` call logged after ``position``."""
        with self.load_log.open(encoding="utf-8") as log:
            log.seek(position)
            entries = [json.loads(line) for line in log if line.strip()]
        return [entry["request"] + entry["blobs"] for entry in entries if entry["kind"] == kind]


async def grow_to(session: Session, target: int, grow: int) -> None:
    """Grow the session until its last sequence is at least ``target``."""
    while (current := await session.last_sequence()) < target:
        await session.turn(f"{GROW_PREFIX}{max(1, min(grow, target - current - 1))}")


async def measure(session: Session, turns: int) -> Figures:
    """Run ``turns`` measured turns and three snapshots, and return their medians."""
    before = process_cpu_seconds()
    position = session.log_position()
    walls = [await session.turn("Where is order A-1?") for _ in range(turns)]
    after = process_cpu_seconds()
    cpu = {name: seconds - before.get(name, 0.0) for name, seconds in after.items()}
    run_model = session.loads_since(position, "RunModel")
    await session.settled()
    position = session.log_position()
    snapshots = [await session.sessions.get_agent_snapshot(session.session_id) for _ in range(3)]
    snapshot_loads = session.loads_since(position, "rpc:get_agent_snapshot")
    page = await session.sessions.list_agent_messages(session.session_id, limit=1)
    last = snapshots[-1]
    appended = 0 if last.state is None else last.state.next_message_sequence - 1
    first = page.deleted_before_sequence or 1
    return Figures(
        appended=appended,
        stored=appended - first + 1,
        run_model_bytes=statistics.median(run_model),
        snapshot_bytes=statistics.median(snapshot_loads),
        snapshot_size=len(str(_SNAPSHOT_CODEC.encode(last).data)),
        worker_cpu_ms=cpu.get("worker", 0.0) / turns * 1000,
        devserver_cpu_ms=cpu.get("devserver", 0.0) / turns * 1000,
        wall_ms=statistics.median(walls) * 1000,
    )


def _kib(value: float) -> str:
    return f"{value / 1024:.1f}"


def print_table(label: str, rows: list[Figures]) -> None:
    """Print one Flow's figures, each size against the first."""
    print(f"\n{label} (load average {os.getloadavg()[0]:.2f})")
    print(
        "appended | stored | RunModel KiB loaded | snapshot KiB loaded | snapshot KiB | "
        "Worker CPU ms/turn | devserver CPU ms/turn | wall ms/turn"
    )
    base = rows[0]
    for row in rows:

        def ratio(value: float, reference: float) -> str:
            return f"{value / reference:.2f}x" if reference else "-"

        print(
            f"{row.appended:>8} | {row.stored:>6} | "
            f"{_kib(row.run_model_bytes)} ({ratio(row.run_model_bytes, base.run_model_bytes)}) | "
            f"{_kib(row.snapshot_bytes)} ({ratio(row.snapshot_bytes, base.snapshot_bytes)}) | "
            f"{_kib(row.snapshot_size)} | "
            f"{row.worker_cpu_ms:.1f} ({ratio(row.worker_cpu_ms, base.worker_cpu_ms)}) | "
            f"{row.devserver_cpu_ms:.1f} ({ratio(row.devserver_cpu_ms, base.devserver_cpu_ms)}) | "
            f"{row.wall_ms:.1f} ({ratio(row.wall_ms, base.wall_ms)})"
        )


async def run(sizes: list[int], turns: int, grow: int, chunk_size: int) -> None:
    """Grow one session per Flow through ``sizes`` and print the figures."""
    flows = build_flows(chunk_size)
    with tempfile.TemporaryDirectory(prefix="dex-agents-long-bench-") as directory:
        load_log = Path(directory) / "loads.jsonl"
        async with AgentTestStack(
            Path(directory),
            list(flows),
            "bench.long_worker",
            worker_cwd=CORE_DIR,
            worker_env={LOAD_LOG_ENV: str(load_log), CHUNK_SIZE_ENV: str(chunk_size)},
        ) as stack:
            await stack.start_worker()
            labels = (
                f"without compaction, {chunk_size} per chunk",
                f"with compaction, {chunk_size} per chunk",
            )
            for flow, label in zip(flows, labels, strict=True):
                rows = await _grow_and_measure(stack, flow, load_log, sizes, turns, grow)
                print_table(label, rows)


async def _grow_and_measure(
    stack: AgentTestStack, flow: AgentSessionFlow, load_log: Path, sizes: list[int], turns: int, grow: int
) -> list[Figures]:
    session = Session(stack.sessions(flow), stack.new_session_id(flow.flow_type), load_log)
    rows: list[Figures] = []
    for size in sizes:
        # The measured turns add four messages each; they straddle the size.
        await grow_to(session, size - 2 * turns, grow)
        started = time.perf_counter()
        rows.append(await measure(session, turns))
        elapsed = time.perf_counter() - started
        print(f"  {flow.flow_type}: measured at {rows[-1].appended} messages in {elapsed:.1f} s", flush=True)
    return rows


@dataclass(frozen=True)
class LargeFigures:
    """One size of the large profile."""

    stored_mib: float
    run_model_warm: float
    run_model_fresh: int
    largest_step_fresh: int
    snapshot_fresh: int
    snapshot_size: int
    worker_rss_mib: float
    devserver_rss_mib: float


async def _stored_mib(session: Session) -> float:
    """The session's stored messages, their JSON with runner items, read back page by page."""
    total = 0
    before: int | None = None
    while True:
        page = await session.sessions.list_agent_messages(
            session.session_id, before_sequence=before, limit=200, include_framework_items=True
        )
        total += sum(len(json.dumps(asdict(message), separators=(",", ":"))) for message in page.messages)
        if page.next_before_sequence is None:
            return total / 1024 / 1024
        before = page.next_before_sequence


def _entries_since(session: Session, position: int) -> list[dict[str, int | str]]:
    with session.load_log.open(encoding="utf-8") as log:
        log.seek(position)
        return [json.loads(line) for line in log if line.strip()]


async def _measure_large(stack: AgentTestStack, session: Session, text: str) -> LargeFigures:
    position = session.log_position()
    for _ in range(3):
        await session.turn(text)
    warm = session.loads_since(position, "RunModel")
    await session.settled()
    stack.kill_workers()
    await stack.start_worker()
    position = session.log_position()
    # The snapshot first, so it meets the empty cache too; then the turn's Steps do.
    snapshot = await session.sessions.get_agent_snapshot(session.session_id)
    await session.turn(text)
    await session.settled()
    await session.sessions.list_agent_messages(session.session_id, limit=50)
    fresh = _entries_since(session, position)
    loads = [int(entry["request"]) + int(entry["blobs"]) for entry in fresh]
    rss = resident_mib()
    return LargeFigures(
        stored_mib=await _stored_mib(session),
        run_model_warm=statistics.median(warm),
        run_model_fresh=max(session.loads_since(position, "RunModel")),
        largest_step_fresh=max(loads),
        snapshot_fresh=max(session.loads_since(position, "rpc:get_agent_snapshot")),
        snapshot_size=len(str(_SNAPSHOT_CODEC.encode(snapshot).data)),
        worker_rss_mib=rss.get("worker", 0.0),
        devserver_rss_mib=rss.get("devserver", 0.0),
    )


async def run_large(sizes_mib: list[int], message_bytes: int, blob_cache_mib: int | None = None) -> None:
    """Grow one large-message session per Flow through ``sizes_mib`` and print the figures."""
    flows = build_large_flows(message_bytes)
    text = "u" * message_bytes
    # Each growth turn stores about this much: eight messages, each its text twice.
    per_growth = 8 * 2 * message_bytes / 1024 / 1024
    with tempfile.TemporaryDirectory(prefix="dex-agents-large-bench-") as directory:
        load_log = Path(directory) / "loads.jsonl"
        async with AgentTestStack(
            Path(directory),
            list(flows),
            "bench.long_worker",
            worker_cwd=CORE_DIR,
            worker_env={LOAD_LOG_ENV: str(load_log), MESSAGE_BYTES_ENV: str(message_bytes)},
            server_args=()
            if blob_cache_mib is None
            else ("--blob-cache-bytes", str(blob_cache_mib * 1024 * 1024)),
        ) as stack:
            await stack.start_worker()
            for flow, label in zip(flows, ("without compaction", "with compaction"), strict=True):
                session = Session(stack.sessions(flow), stack.new_session_id(flow.flow_type), load_log)
                rows: list[LargeFigures] = []
                grown = 0.0
                for size in sizes_mib:
                    while grown < size:
                        await session.turn(f"{GROW_PREFIX}8")
                        grown += per_growth
                    rows.append(await _measure_large(stack, session, text))
                    print(f"  {flow.flow_type}: measured at {rows[-1].stored_mib:.1f} MiB", flush=True)
                _print_large(f"{label}, {message_bytes // 1024} KiB messages", rows)
            print(f"\nlargest sent by the devserver, bytes: {stack.largest_sizes()}")


def _print_large(label: str, rows: list[LargeFigures]) -> None:
    print(f"\n{label} (load average {os.getloadavg()[0]:.2f})")
    print(
        "stored MiB | RunModel KiB loaded, warm | fresh Worker: RunModel KiB | largest Step KiB | "
        "snapshot KiB loaded | snapshot KiB | Worker RSS MiB | devserver RSS MiB"
    )
    for row in rows:
        print(
            f"{row.stored_mib:.1f} | {_kib(row.run_model_warm)} | {_kib(row.run_model_fresh)} | "
            f"{_kib(row.largest_step_fresh)} | {_kib(row.snapshot_fresh)} | {_kib(row.snapshot_size)} | "
            f"{row.worker_rss_mib:.0f} | {row.devserver_rss_mib:.0f}"
        )


def main() -> None:
    """Parse the arguments and run the benchmark."""
    parser = argparse.ArgumentParser(description="Turn cost as a session grows, with and without compaction")
    parser.add_argument("--profile", choices=("small", "large"), default="small", help="message sizes")
    parser.add_argument("--sizes", default="64,1000,10000", help="comma-separated message counts")
    parser.add_argument("--turns", type=int, default=10, help="measured turns per size")
    parser.add_argument("--grow", type=int, default=120, help="messages per growth turn")
    parser.add_argument("--chunk-size", type=int, default=32, help="message_chunk_size of both Flows")
    parser.add_argument("--sizes-mib", default="1,10,50", help="large profile: stored MiB to measure at")
    parser.add_argument("--message-kib", type=int, default=100, help="large profile: KiB per message")
    parser.add_argument(
        "--blob-cache-mib", type=int, default=None, help="large profile: the devserver's --blob-cache-bytes"
    )
    arguments = parser.parse_args()
    if arguments.profile == "large":
        sizes_mib = [int(size) for size in arguments.sizes_mib.split(",")]
        asyncio.run(run_large(sizes_mib, arguments.message_kib * 1024, arguments.blob_cache_mib))
        return
    sizes = [int(size) for size in arguments.sizes.split(",")]
    asyncio.run(run(sizes, arguments.turns, arguments.grow, arguments.chunk_size))


if __name__ == "__main__":
    main()
