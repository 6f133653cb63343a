"""File gates: stop code in a Worker child at an exact point until the test releases it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

__all__ = ["FileGate"]

_POLL_SECONDS = 0.02


class FileGate:
    """A gate shared by a test and a Worker child through two marker files.

    In the Worker child, code calls :meth:`mark_reached` and then awaits :meth:`wait_for_release`. The test
    awaits :meth:`wait_until_reached` and then acts at that exact point: it kills the Worker, checks that
    another gate is reached at the same time (which proves two Steps run in parallel), or calls
    :meth:`release`. A released gate stays released.

    Args:
        state_dir: A directory both processes see, such as pytest's ``tmp_path``.
        name: The gate's name; use a name unique within ``state_dir`` (for example include the session ID).
    """

    def __init__(self, state_dir: Path | str, name: str) -> None:
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"invalid gate name {name!r}")
        directory = Path(state_dir) / "gates"
        self._name = name
        self._reached = directory / f"{name}.reached"
        self._released = directory / f"{name}.released"

    @property
    def name(self) -> str:
        """The gate's name."""
        return self._name

    @property
    def is_reached(self) -> bool:
        """Whether some process has reached the gate."""
        return self._reached.exists()

    @property
    def is_released(self) -> bool:
        """Whether the test has released the gate."""
        return self._released.exists()

    def mark_reached(self) -> None:
        """Record that the calling process reached the gate (Worker side)."""
        self._reached.parent.mkdir(parents=True, exist_ok=True)
        with self._reached.open("a", encoding="utf-8") as marker:
            marker.write(f"{os.getpid()}\n")

    async def wait_for_release(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Wait until the test releases the gate (Worker side).

        Args:
            timeout: Seconds to wait; ``None`` waits until the process is killed.

        Raises:
            TimeoutError: If the gate stays closed past ``timeout``.
        """
        async with asyncio.timeout(timeout):
            # The other side is another process: a file is the only signal both can see.
            while not self._released.exists():  # noqa: ASYNC110
                await asyncio.sleep(_POLL_SECONDS)

    async def pass_through(self) -> None:
        """Mark the gate reached, then wait for its release (Worker side)."""
        self.mark_reached()
        await self.wait_for_release()

    async def wait_until_reached(self, timeout: float = 30.0) -> None:  # noqa: ASYNC109
        """Wait until a Worker reaches the gate (test side).

        Args:
            timeout: Seconds to wait.

        Raises:
            TimeoutError: If no process reaches the gate in time.
        """
        try:
            async with asyncio.timeout(timeout):
                while not self._reached.exists():  # noqa: ASYNC110
                    await asyncio.sleep(_POLL_SECONDS)
        except TimeoutError:
            raise TimeoutError(f"gate {self._name!r} was not reached within {timeout} s") from None

    def release(self) -> None:
        """Open the gate (test side); every waiter, present and future, passes."""
        self._released.parent.mkdir(parents=True, exist_ok=True)
        self._released.touch()

    def reached_by(self) -> list[int]:
        """Return the process IDs that reached the gate, in order."""
        if not self._reached.exists():
            return []
        return [int(line) for line in self._reached.read_text(encoding="utf-8").split()]
