"""The ``dex-devserver`` command line: ``serve`` and ``history``."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import sys
from collections.abc import Sequence
from typing import Any

import grpc
from dex.dexpb import dex_pb2 as pb
from dex.dexpb import dex_pb2_grpc as pbg

from ._blobs import DEFAULT_BLOB_CACHE_BYTES, DEFAULT_MAX_VALUE_BYTES
from ._history import blob_values, event_json
from ._server import DevServer, ServerOptions, serve_forever
from ._store import StoreError

__all__ = ["main"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration(text: str) -> float:
    """Parses ``90``, ``45s``, ``30m``, ``12h`` or ``7d`` as seconds."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a positive duration such as 90, 45s, 30m, 12h or 7d"
        )
    return float(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dex-devserver", description="A Dex-compatible development server.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve FlowService and WorkerTaskService on one port")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8801, help="0 binds a free port")
    storage = serve.add_mutually_exclusive_group()
    storage.add_argument("--db", metavar="PATH", help="SQLite file (default: dex-devserver.sqlite3)")
    storage.add_argument("--memory", action="store_true", help="keep everything in memory")
    serve.add_argument(
        "--default-worker-target",
        metavar="ADDR",
        help="push-mode Worker address for Flows started without a worker target (default: pull mode)",
    )
    serve.add_argument("--dispatch-wait", type=float, default=10.0, metavar="SECONDS")
    serve.add_argument("--max-value-bytes", type=int, default=DEFAULT_MAX_VALUE_BYTES, metavar="N")
    serve.add_argument(
        "--retain-closed",
        type=_duration,
        metavar="DURATION",
        help="delete a closed run's data this long after it closed (90, 45s, 30m, 12h, 7d; default: keep)",
    )
    serve.add_argument(
        "--blob-cache-bytes",
        type=int,
        default=DEFAULT_BLOB_CACHE_BYTES,
        metavar="N",
        help="bytes of blob content cached in memory",
    )
    serve.add_argument(
        "--stop-grace",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="on SIGTERM/SIGINT, how long attempts that reached a Worker may take to finish",
    )
    serve.add_argument(
        "--size-report",
        metavar="PATH",
        help="keep the largest message sent and value accepted, per kind, in this JSON file",
    )
    serve.add_argument("--log-level", default="WARNING")
    history = commands.add_parser("history", help="print a Flow's history as JSON")
    history.add_argument("flow_id", metavar="FLOW_ID")
    history.add_argument("--server", default="localhost:8801", metavar="ADDR")
    history.add_argument("--run-id", default="", metavar="ID")
    history.add_argument(
        "--no-hydrate",
        dest="hydrate",
        action="store_false",
        help="keep blob references instead of their values",
    )
    return parser


def _serve(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=str(args.log_level).upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.dispatch_wait <= 0:
        print("dex-devserver: --dispatch-wait must be positive", file=sys.stderr)
        return 2
    for flag, value in (
        ("--max-value-bytes", args.max_value_bytes),
        ("--blob-cache-bytes", args.blob_cache_bytes),
    ):
        if value <= 0:
            print(f"dex-devserver: {flag} must be positive", file=sys.stderr)
            return 2
    if args.stop_grace < 0:
        print("dex-devserver: --stop-grace must not be negative", file=sys.stderr)
        return 2
    options = ServerOptions(
        host=args.host,
        port=args.port,
        db_path=None if args.memory else (args.db or "dex-devserver.sqlite3"),
        default_worker_target=args.default_worker_target,
        dispatch_wait=args.dispatch_wait,
        max_value_bytes=args.max_value_bytes,
        blob_cache_bytes=args.blob_cache_bytes,
        retain_closed=args.retain_closed,
        stop_grace=args.stop_grace,
        size_report=args.size_report,
    )

    def ready(address: str) -> None:
        print(f"listening on {address}", flush=True)

    async def run() -> None:
        await serve_forever(DevServer(options), ready)

    try:
        asyncio.run(run())
    except (OSError, StoreError) as error:
        print(f"dex-devserver: {error}", file=sys.stderr)
        return 1
    return 0


def _history(args: argparse.Namespace) -> int:
    with grpc.insecure_channel(args.server) as channel:
        # The generated stub is untyped; the response types are pinned where they are read.
        stub: Any = pbg.FlowServiceStub(channel)
        try:
            summary: pb.GetFlowSummaryResponse = stub.GetFlowSummary(
                pb.GetFlowSummaryRequest(flow_id=args.flow_id, run_id=args.run_id), timeout=30
            )
            run_id = summary.flow_execution_id.run_id
            events: list[dict[str, Any]] = []
            token = b""
            while True:
                page: pb.GetHistoryEventsResponse = stub.GetHistoryEvents(
                    pb.GetHistoryEventsRequest(flow_id=args.flow_id, run_id=run_id, next_page_token=token),
                    timeout=30,
                )
                if args.hydrate:
                    _hydrate(stub, args.flow_id, list(page.events))
                events.extend(event_json(event) for event in page.events)
                token = page.next_page_token
                if not token:
                    break
        except grpc.RpcError as error:
            print(f"dex-devserver history: {error.details()}", file=sys.stderr)  # pyright: ignore[reportUnknownMemberType, reportAttributeAccessIssue]
            return 1
    print(json.dumps({"flowId": args.flow_id, "runId": run_id, "events": events}, indent=2))
    return 0


def _hydrate(stub: Any, flow_id: str, events: list[pb.FlowHistoryEvent]) -> None:
    references = [value for event in events for value in blob_values(event)]
    if not references:
        return
    request = pb.LoadBlobsRequest(
        entries=[pb.LoadBlobRequestEntry(flow_id=flow_id, blob_value=value) for value in references]
    )
    loaded: pb.LoadBlobsResponse = stub.LoadBlobs(request, timeout=30)
    for value in references:
        blob_id = value.internal_blob_id_for_string_value or value.internal_blob_id_for_obj_value
        if blob_id in loaded.values:
            value.CopyFrom(loaded.values[blob_id])


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line.

    Args:
        argv: The arguments, without the program name; defaults to ``sys.argv[1:]``.

    Returns:
        The exit status.
    """
    args = _parser().parse_args(argv)
    if args.command == "serve":
        return _serve(args)
    return _history(args)
