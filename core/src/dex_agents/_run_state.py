"""The envelope of a runner's framework run state: its format name and version around the runner's fields.

A session keeps the run state of a turn's last `ToolCallsRequested` and hands it back to whichever Worker
runs the next model call. That Worker may run a newer release of the runner, or (after a Flow type was
pointed at another agent) another runner altogether, so each runner writes its state inside an envelope
that names its shape, and refuses any other shape with an error that says whose state it is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

__all__ = ["RunStateFormat", "RunStateFormatError"]

_FORMAT = "format"
_VERSION = "version"


class RunStateFormatError(ValueError):
    """A framework run state is not one the runner reads: not JSON, another runner's, or another version."""


@dataclass(frozen=True)
class RunStateFormat:
    """One runner's run-state shape: ``{"format": name, "version": version, <the runner's fields>}``.

    Attributes:
        name: Names the shape, unique across runners, such as ``"dex-agents-pydantic-ai/run-state"``.
        version: The version of the shape this release writes and reads.
        runner: The runner's name, for errors (``"PydanticAiRunner"``).
    """

    name: str
    version: int
    runner: str

    def wrap(self, fields: Mapping[str, object]) -> str:
        """Return ``fields`` inside the envelope, as compact JSON text.

        Non-ASCII text is escaped, so text holding a lone surrogate (which some model outputs do) still
        encodes as UTF-8 when the session stores it.

        Args:
            fields: The runner's own fields; JSON values.

        Returns:
            The framework run state to put in `ToolCallsRequested`.

        Raises:
            ValueError: If ``fields`` has a ``format`` or ``version`` key of its own.
            TypeError: If a value is not JSON.
        """
        taken = sorted(key for key in (_FORMAT, _VERSION) if key in fields)
        if taken:
            raise ValueError(f"run-state fields may not be named {taken}: the envelope uses those names")
        return json.dumps(
            {_FORMAT: self.name, _VERSION: self.version, **fields}, separators=(",", ":"), allow_nan=False
        )

    def unwrap(self, text: str) -> dict[str, Any]:
        """Return the runner's fields of a run state that `wrap` wrote, without ``format`` and ``version``.

        Args:
            text: `AgentTurnContext.framework_run_state`.

        Returns:
            The fields.

        Raises:
            RunStateFormatError: If ``text`` is not JSON, is another runner's state (its format differs or
                it has none), or has another version; the message says which.
        """
        try:
            loaded: object = json.loads(text)
        except json.JSONDecodeError as error:
            raise RunStateFormatError(
                f"the framework run state is not JSON, so {self.runner} cannot continue the turn: {error}"
            ) from error
        except RecursionError:
            # The standard decoder recurses per level; a state holding a model's deeply nested JSON as
            # values would otherwise fail every attempt with an error that names nothing.
            raise RunStateFormatError(
                f"the framework run state nests arrays and objects too deeply to decode, so {self.runner} "
                "cannot continue the turn"
            ) from None
        if not isinstance(loaded, dict):
            raise RunStateFormatError(
                f"the framework run state was not written by {self.runner}: it is a JSON "
                f"{type(loaded).__name__}, not an object with format {self.name!r}"
            )
        data = cast(dict[str, Any], loaded)
        found = data.pop(_FORMAT, None)
        if found != self.name:
            written = "has no format" if found is None else f"has format {found!r}"
            raise RunStateFormatError(
                f"the framework run state was not written by {self.runner}: it {written}, and "
                f"{self.runner} reads {self.name!r}; a turn must continue with the runner that started it"
            )
        version = data.pop(_VERSION, None)
        if version != self.version:
            raise RunStateFormatError(
                f"the framework run state has version {version!r} of {self.name!r}, and this release of "
                f"{self.runner} reads version {self.version}"
            )
        return data
