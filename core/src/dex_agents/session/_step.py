"""The base of every session Step: the one constructor, and options from the table by Step type."""

from __future__ import annotations

from typing import TypeVar

from dex import Step, StepOptions

from dex_agents.session._deps import SessionDeps
from dex_agents.session._moves import Moves

__all__ = ["SessionStep"]

_InputT = TypeVar("_InputT")


class SessionStep(Step[_InputT]):
    """A session Step: it holds the Flow type's dependencies and the movements it may make.

    Its options are its Step type's in `STEP_RULES`, for a movement that names no instances to load; every
    movement carries its own complete set (see ``_step_options.py``).
    """

    def __init__(self, deps: SessionDeps, moves: Moves) -> None:
        """Create the Step for one Flow type."""
        self._deps = deps
        self._moves = moves

    def get_step_options(self) -> StepOptions:
        """The Step type's options, loading nothing a movement would name."""
        return self._moves.options_of(self.get_step_type())
