"""How a turn's session settings choose the model and the instructions of its Pydantic AI model calls."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

from pydantic_ai.models import KnownModelName, Model

__all__ = ["InstructionsForSettings", "ModelForSettings", "SettingsChoice"]

ModelForSettings: TypeAlias = Callable[[Mapping[str, object]], Model | KnownModelName | str | None]
"""Chooses a turn's model from its session settings; `None` keeps the runner's (or the agent's) model."""

InstructionsForSettings: TypeAlias = Callable[[Mapping[str, object]], str | None]
"""Returns instructions a turn adds to the agent's own, from its session settings; `None` adds none."""


@dataclass(frozen=True)
class SettingsChoice:
    """The application's hooks, asked what a turn runs with.

    Attributes:
        model_for_settings: The runner's model hook, if any.
        instructions_for_settings: The runner's instructions hook, if any.
    """

    model_for_settings: ModelForSettings | None
    instructions_for_settings: InstructionsForSettings | None

    def model(
        self, settings: Mapping[str, object], default: Model | KnownModelName | str | None
    ) -> Model | KnownModelName | str | None:
        """The turn's model: the hook's choice, else ``default``. Whatever the hook raises propagates."""
        chosen = None if self.model_for_settings is None else self.model_for_settings(settings)
        return default if chosen is None else chosen

    def instructions(self, settings: Mapping[str, object]) -> str | None:
        """The instructions the turn adds, or `None`. Whatever the hook raises propagates."""
        return None if self.instructions_for_settings is None else self.instructions_for_settings(settings)
