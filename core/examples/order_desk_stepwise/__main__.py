"""The order-desk demo on Stepwise: a plan the user approves, then a refund approved across a Worker kill.

    python -m examples.order_desk_stepwise [--model scripted|<LiteLLM model>] [--yes]

Run it from ``core/`` (or with ``scripts/demo --runner stepwise``). It starts a devserver and a Worker
process and sends the customer's message in plan mode: the agent drafts a plan with ``write_todos``, which
the demo prints and you approve. The executing turn streams its text, looks the order up, keeps the plan's
tasks current, and asks to refund; while that approval waits, the demo SIGKILLs the Worker and starts a
replacement. Both approvals are asked at the terminal (or given by the demo with ``--yes`` or without a
terminal). At the end it prints the stored transcript, the plan, the Step history, and the refund ledger,
which shows the refund ran exactly once. The session is `examples.order_desk_stepwise.demo`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from examples.order_desk_stepwise.demo import run_plan_demo


def main() -> int:
    """Run the demo from the command line: ``[--model NAME] [--yes]``."""
    parser = argparse.ArgumentParser(prog="python -m examples.order_desk_stepwise", description=__doc__)
    parser.add_argument(
        "--model",
        default="scripted",
        help="'scripted' (default, no keys needed) or a LiteLLM model string such as openai/gpt-4.1-mini",
    )
    parser.add_argument("--yes", action="store_true", help="approve the plan and the refund without asking")
    arguments = parser.parse_args()
    interactive = not arguments.yes and sys.stdin.isatty()
    return asyncio.run(run_plan_demo(arguments.model, interactive=interactive))


if __name__ == "__main__":
    sys.exit(main())
