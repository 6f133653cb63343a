"""How a turn's session settings choose the model and the instructions of its ADK model calls."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

from google.adk.models import BaseLlm

__all__ = ["InstructionsForSettings", "ModelForSettings", "TurnChoices", "choose_for_turn"]

ModelForSettings: TypeAlias = Callable[[Mapping[str, object]], str | BaseLlm | None]
"""Chooses a turn's model from its session settings: a model name ADK knows, or a `BaseLlm`; `None` keeps
the root agent's own model."""

InstructionsForSettings: TypeAlias = Callable[[Mapping[str, object]], str | None]
"""Returns instructions each model request of a turn gets after the agent's own, from its session
settings; `None` adds none."""


@dataclass(frozen=True)
class TurnChoices:
    """What a turn's settings chose.

    Attributes:
        model: The root agent's model for the turn, or `None` to keep its own.
        instructions: Instructions to add to every model request of the turn, or `None`.
    """

    model: str | BaseLlm | None = None
    instructions: str | None = None


def choose_for_turn(
    settings: Mapping[str, object],
    model_for_settings: ModelForSettings | None,
    instructions_for_settings: InstructionsForSettings | None,
) -> TurnChoices:
    """Ask the application's hooks what a turn with ``settings`` runs with.

    Args:
        settings: The settings the turn started with (`AgentTurnContext.session_settings`).
        model_for_settings: The runner's model hook, if any.
        instructions_for_settings: The runner's instructions hook, if any.

    Returns:
        The choices.

    Raises:
        TypeError: If a hook returns something other than what its type allows. Whatever a hook raises
            propagates.
    """
    model = None if model_for_settings is None else model_for_settings(settings)
    if model is not None and not isinstance(model, str | BaseLlm):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"model_for_settings must return a model name, a BaseLlm or None, not {model!r}")
    if isinstance(model, str) and not model:
        raise TypeError("model_for_settings returned an empty model name")
    instructions = None if instructions_for_settings is None else instructions_for_settings(settings)
    if instructions is not None and not isinstance(instructions, str):  # pyright: ignore[reportUnnecessaryIsInstance]
        raise TypeError(f"instructions_for_settings must return text or None, not {instructions!r}")
    return TurnChoices(model=model, instructions=instructions)
