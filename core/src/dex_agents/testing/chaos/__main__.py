"""``python -m dex_agents.testing.chaos``: one package's chaos run, from the package's directory.

Exits 0 when every invariant held, 1 when one broke (the summary names it and the replay command), and 2
on bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

from dex_agents.testing.chaos._run import ChaosSettings, run_chaos
from dex_agents.testing.chaos._spec import load_chaos_spec


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m dex_agents.testing.chaos",
        description="Run one package's scripted sessions under Worker and engine SIGKILLs, then check them.",
    )
    parser.add_argument("--spec", required=True, help="module:attribute of a ChaosSpec or MatrixSpec")
    parser.add_argument("--name", required=True, help="the package's label in reports")
    parser.add_argument("--seed", type=int, required=True, help="plans the sessions and the faults")
    parser.add_argument("--kills", type=int, required=True, help="Worker process groups to SIGKILL")
    parser.add_argument("--engine-crashes", type=int, default=0, help="engine SIGKILLs with a restart")
    parser.add_argument(
        "--rolling-deploys", type=int, default=0, help="SIGTERM every Worker in turn and replace it, N times"
    )
    parser.add_argument("--max-seconds", type=float, default=600.0, help="when the faults stop at the latest")
    parser.add_argument("--sessions", type=int, default=4, help="sessions running at once")
    parser.add_argument("--workers", type=int, default=2, help="Workers kept running")
    parser.add_argument("--results", type=Path, help="write the JSON report here")
    parser.add_argument("--replay", default="", help="the command that replays this run, for the report")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the chaos suite for one package.

    Args:
        argv: The arguments (default: the command line's).

    Returns:
        The exit code.
    """
    arguments = _parser().parse_args(argv)
    faults = (arguments.kills, arguments.engine_crashes, arguments.rolling_deploys)
    if min(faults) < 0 or arguments.sessions < 1 or arguments.workers < 1:
        print(
            "error: --kills, --engine-crashes and --rolling-deploys must be >= 0,"
            " --sessions and --workers >= 1",
            file=sys.stderr,
        )
        return 2
    spec = load_chaos_spec(arguments.spec)
    settings = ChaosSettings(
        name=arguments.name,
        spec_reference=arguments.spec,
        seed=arguments.seed,
        worker_kills=arguments.kills,
        engine_crashes=arguments.engine_crashes,
        rolling_deploys=arguments.rolling_deploys,
        max_seconds=arguments.max_seconds,
        concurrent_sessions=arguments.sessions,
        workers=arguments.workers,
        replay=arguments.replay,
    )
    state_dir = Path(tempfile.mkdtemp(prefix=f"dex-agents-chaos-{arguments.name}-"))
    report = asyncio.run(run_chaos(spec, settings, state_dir, log=lambda line: print(line, flush=True)))
    if arguments.results is not None:
        report.write(arguments.results)
    print(report.summary(), flush=True)
    if report.passed:
        shutil.rmtree(state_dir, ignore_errors=True)
        return 0
    print(f"  the run's logs, scripts and tool ledger are kept in {state_dir}", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
