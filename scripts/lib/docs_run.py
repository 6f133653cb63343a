"""Run a documentation page's runnable blocks as a reader would, or list the pages that have them.

    python scripts/lib/docs_run.py --list docs/pages          # "<package> <page>" per runnable page
    python scripts/lib/docs_run.py docs/pages/get-started/x.md   # run one page (in its package's env)

A page marks the code blocks a reader saves as files (``<!-- file: NAME -->`` before the fence), the exact
output a run prints (``<!-- output: NAME -->`` before a ```text fence) and, once, how to run them:

    <!-- runnable: package=pydantic-ai steps="start agent_worker.py; run client.py; kill agent_worker.py" -->

Running a page writes its files into a fresh directory, starts a private devserver (every ``localhost:8801``
in the files becomes its address, the one change to what the page says) and takes the steps in order:
``start F`` starts ``python F`` in the background, ``run F`` runs it to its end (exit 0, and the page's
``output: F`` block exactly, if it has one), ``kill F`` sends SIGKILL to what ``start F`` began. At the end
every process still running gets SIGTERM and must exit 0, as a Worker that drains does.

Listing needs only the standard library, so scripts/docs can find the pages before any package environment
exists; running needs the package's environment (``dex_agents.testing`` starts the devserver).
"""

from __future__ import annotations

import argparse
import re
import shlex
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

_RUNNABLE = re.compile(r"^<!-- runnable: (?P<attributes>.*?) -->$", re.MULTILINE)
_FILE = re.compile(
    r"^<!-- file: (?P<name>[^\s>]+) -->\n```[a-z]*\n(?P<code>.*?)^```$", re.MULTILINE | re.DOTALL
)
_OUTPUT = re.compile(
    r"^<!-- output: (?P<name>[^\s>]+) -->\n```text\n(?P<text>.*?)^```$", re.MULTILINE | re.DOTALL
)
_PAGE_ADDRESS = "localhost:8801"
_RUN_TIMEOUT_SECONDS = 180.0
_STOP_TIMEOUT_SECONDS = 60.0
_STEP_VERBS = ("start", "run", "kill")


class PageError(Exception):
    """A page whose markers are wrong, or whose blocks did not run as the page says."""


@dataclass(frozen=True)
class RunnablePage:
    """What one page asks to be run.

    Attributes:
        path: The page.
        package: The repository folder whose environment runs the files.
        steps: ``(verb, file name)`` pairs in order.
        files: Each marked file's text by name.
        outputs: The exact standard output each ``run`` must print, by file name, where the page shows it.
    """

    path: Path
    package: str
    steps: tuple[tuple[str, str], ...]
    files: dict[str, str]
    outputs: dict[str, str]


def read_page(path: Path) -> RunnablePage | None:
    """Read a page's runnable markers; None for a page with none.

    Raises:
        PageError: If the page marks files or outputs but says nothing about running them, names a file
            twice, or its steps name an unknown verb or a file the page does not mark.
    """
    text = path.read_text(encoding="utf-8")
    files: dict[str, str] = {}
    for match in _FILE.finditer(text):
        if match.group("name") in files:
            raise PageError(f"{path}: two blocks are marked as file {match.group('name')!r}")
        files[match.group("name")] = match.group("code")
    outputs = {match.group("name"): match.group("text") for match in _OUTPUT.finditer(text)}
    markers = _RUNNABLE.findall(text)
    if not markers:
        if files or outputs:
            raise PageError(f"{path}: marks files or outputs but has no <!-- runnable: ... --> marker")
        return None
    if len(markers) > 1:
        raise PageError(f"{path}: has {len(markers)} runnable markers; a page runs one sequence")
    attributes = dict(item.split("=", 1) for item in shlex.split(markers[0]) if "=" in item)
    package = attributes.get("package", "")
    if not package:
        raise PageError(f"{path}: the runnable marker names no package=")
    steps: list[tuple[str, str]] = []
    for step in attributes.get("steps", "").split(";"):
        words = step.split()
        if len(words) != 2 or words[0] not in _STEP_VERBS:
            raise PageError(f"{path}: step {step.strip()!r} is not '<start|run|kill> <file>'")
        if words[1] not in files:
            raise PageError(f"{path}: step {step.strip()!r} names a file the page does not mark")
        steps.append((words[0], words[1]))
    last_run = max((index for index, (verb, _) in enumerate(steps) if verb == "run"), default=-1)
    if any(verb == "start" for verb, _ in steps[last_run + 1 :]):
        # A Worker stopped before anything used it may still be importing, with no SIGTERM handler yet.
        raise PageError(f"{path}: a 'start' step comes after the last 'run'; nothing would use that process")
    for name in outputs:
        if ("run", name) not in steps:
            raise PageError(f"{path}: shows the output of {name!r}, which no 'run' step runs")
    return RunnablePage(path, package, tuple(steps), files, outputs)


def run_page(page: RunnablePage, directory: Path) -> None:
    """Run a page's steps in ``directory`` against a private devserver.

    Raises:
        PageError: If a run exits non-zero, prints other than the page shows, outruns its timeout, or a
            started process does not exit 0 on SIGTERM.
    """
    # Imported here, from the package environment this runs in: listing needs no environment at all.
    from dex_agents.testing import DevServerProcess  # noqa: PLC0415

    # A reader starts the client once the Worker is up; the steps do not wait, so on a busy machine the
    # first message may wait longer than the default 10 s for a Worker still importing its framework.
    server = DevServerProcess(
        directory / "devserver.sqlite3", directory / "devserver.log", ("--dispatch-wait", "120")
    )
    address = server.start()
    started: dict[str, subprocess.Popen[bytes]] = {}
    logs: list[Path] = []
    try:
        for name, text in page.files.items():
            (directory / name).write_text(text.replace(_PAGE_ADDRESS, address), encoding="utf-8")
        for number, (verb, name) in enumerate(page.steps, start=1):
            where = f"{page.path}: step {number} ({verb} {name})"
            if verb == "start":
                log = directory / f"{number}-{name}.log"
                logs.append(log)
                with log.open("wb") as sink:
                    started[name] = subprocess.Popen(
                        [sys.executable, name], cwd=directory, stdout=sink, stderr=subprocess.STDOUT
                    )
            elif verb == "kill":
                process = started.pop(name, None)
                if process is None:
                    raise PageError(f"{where}: nothing started from {name} is running")
                process.kill()
                process.wait()
            else:
                try:
                    done = subprocess.run(
                        [sys.executable, name],
                        cwd=directory,
                        capture_output=True,
                        text=True,
                        timeout=_RUN_TIMEOUT_SECONDS,
                        check=False,
                    )
                except subprocess.TimeoutExpired as error:
                    raise PageError(f"{where}: still running after {_RUN_TIMEOUT_SECONDS:.0f} s") from error
                if done.returncode != 0:
                    raise PageError(f"{where}: exited {done.returncode}\n{done.stderr}\n{_tails(logs)}")
                expected = page.outputs.get(name)
                if expected is not None and done.stdout.rstrip() != expected.rstrip():
                    raise PageError(
                        f"{where}: printed other than the page shows\n--- the page\n{expected}"
                        f"--- the run\n{done.stdout}\n{_tails(logs)}"
                    )
        for name, process in started.items():
            process.send_signal(signal.SIGTERM)
            try:
                status = process.wait(timeout=_STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                limit = f"{_STOP_TIMEOUT_SECONDS:.0f} s"
                raise PageError(f"{page.path}: {name} still ran {limit} after SIGTERM") from None
            if status != 0:
                raise PageError(f"{page.path}: {name} exited {status} on SIGTERM\n{_tails(logs)}")
    finally:
        for process in started.values():
            if process.poll() is None:
                process.kill()
                process.wait()
        server.stop()


def _tails(logs: list[Path]) -> str:
    parts: list[str] = []
    for log in logs:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()[-30:]
        parts.append(f"--- last lines of {log.name}\n" + "\n".join(lines))
    return "\n".join(parts)


def main() -> int:
    """Run the pages given, or list the runnable ones under a folder."""
    parser = argparse.ArgumentParser(description="Run a docs page's runnable blocks, or list such pages.")
    parser.add_argument("--list", type=Path, metavar="FOLDER", help="list the runnable pages under FOLDER")
    parser.add_argument("pages", nargs="*", type=Path)
    arguments = parser.parse_args()
    try:
        if arguments.list is not None:
            for path in sorted(arguments.list.rglob("*.md")):
                page = read_page(path)
                if page is not None:
                    print(page.package, path)
            return 0
        for path in arguments.pages:
            page = read_page(path)
            if page is None:
                raise PageError(f"{path}: has no runnable marker")
            with tempfile.TemporaryDirectory(prefix="docs-run-") as directory:
                run_page(page, Path(directory))
            print(f"ran {path}: {len(page.steps)} steps, {len(page.outputs)} outputs as shown")
    except PageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
