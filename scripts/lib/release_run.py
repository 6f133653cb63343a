"""Run a README's "Run it yourself" files, or the order-desk demo, with packages installed from wheels.

    VENV/bin/python scripts/lib/release_run.py readme MODULE README WORKER_FILE CLIENT_FILE
    VENV/bin/python scripts/lib/release_run.py demo MODULE EXAMPLES_DIR

MODULE is the adapter's import package, which must come from its wheel too.

Run by ``scripts/release-check`` with the interpreter of a fresh virtual environment, from a directory
outside the repository, so every ``dex_agents`` import comes from the installed wheels. ``readme`` writes
the README's Worker and client files to a temporary directory and runs them on a private devserver (the
test kit's `run_readme_files`); ``demo`` runs ``python -m examples.order_desk --yes`` from a copy of an
adapter's ``examples`` folder. Either exits 1 with the output when the run fails.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from dex_agents.testing import STATE_DIR_ENV, check_order_desk_output, readme_snippets, run_readme_files

_SITE = Path(sysconfig.get_paths()["purelib"]).resolve()


def _from_wheels(*modules: str) -> None:
    for name in modules:
        module = importlib.import_module(name)
        location = Path(str(module.__file__)).resolve()
        if _SITE not in location.parents:
            raise SystemExit(f"error: {name} was imported from {location}, not from the installed wheel")


def run_readme(readme: Path, worker: str, client: str) -> None:
    snippets = readme_snippets(readme)
    with tempfile.TemporaryDirectory(prefix="release-readme-") as directory:
        files = {worker: snippets[worker], client: snippets[client]}
        run = run_readme_files(
            Path(directory),
            files,
            worker=worker,
            client=client,
            env={STATE_DIR_ENV: directory},
            timeout=150,
        )
    if run.client_returncode != 0 or run.worker_exit != 0 or "completed" not in run.client_stdout:
        print(run.client_stdout, run.client_stderr, run.worker_log, sep="\n", file=sys.stderr)
        raise SystemExit(f"error: {readme}'s files failed (client {run.client_returncode}, Worker {run.worker_exit})")
    print(f"    {readme.parent.name} README: {worker} and {client} ran; the client printed:")
    for line in run.client_stdout.splitlines():
        print(f"      {line}")


def run_demo(examples: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="release-demo-") as directory:
        shutil.copytree(examples, Path(directory) / "examples", ignore=shutil.ignore_patterns("__pycache__"))
        completed = subprocess.run(
            [sys.executable, "-m", "examples.order_desk", "--yes"],
            cwd=directory,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    if completed.returncode != 0:
        print(completed.stdout, completed.stderr, sep="\n", file=sys.stderr)
        raise SystemExit(f"error: the order-desk demo exited with {completed.returncode}")
    check_order_desk_output(completed.stdout, answer_sequence=8, model_calls=3)
    ledger = completed.stdout.split("Refund ledger:", 1)[1].strip().splitlines()
    print(f"    the order-desk demo ran: Refund ledger: {ledger[0]}")


def main() -> None:
    _from_wheels("dex_agents", "dex_devserver", sys.argv[2])
    if sys.argv[1] == "readme":
        run_readme(Path(sys.argv[3]), sys.argv[4], sys.argv[5])
    elif sys.argv[1] == "demo":
        run_demo(Path(sys.argv[3]))
    else:
        raise SystemExit(f"error: unknown command {sys.argv[1]!r}")


if __name__ == "__main__":
    main()
