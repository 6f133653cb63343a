"""A turn's session settings as the SDK sees them: the run's model and instructions added to every call.

The session copies its settings into each turn when the turn starts (`AgentTurnContext.session_settings`),
so every Step of a turn, and every retry, builds the same run configuration from them:

- ``model_for_settings`` chooses the run's model, which the SDK puts in `RunConfig.model`: it replaces
  the model of every agent of the run, handoff targets included, for that run only;
- ``instructions_for_settings`` returns text that every model call of the run gets after the agent's own
  instructions, through `RunConfig.call_model_input_filter` (after the user's own filter, if any).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias, cast

from agents import Model, RunConfig
from agents.run_config import CallModelData, CallModelInputFilter, ModelInputData

__all__ = ["InstructionsForSettings", "ModelForSettings", "SessionSettingsError", "TurnRunConfig"]

ModelForSettings: TypeAlias = Callable[[Mapping[str, object]], Model | str | None]
"""Chooses a turn's model from its session settings: a model name the run's provider resolves, an
`agents.Model`, or `None` to keep the run configuration's model (else each agent's own)."""

InstructionsForSettings: TypeAlias = Callable[[Mapping[str, object]], str | None]
"""Returns instructions every model call of a turn gets after the agent's own, from the turn's session
settings; `None` or empty text adds none."""


class SessionSettingsError(Exception):
    """A turn's session settings chose no usable model or instructions; every attempt would fail alike."""


def _with_instructions(user_filter: CallModelInputFilter | None, extra: str) -> CallModelInputFilter:
    async def add_instructions(data: CallModelData[Any]) -> ModelInputData:
        model_data = data.model_data
        if user_filter is not None:
            filtered = user_filter(data)
            model_data = await filtered if inspect.isawaitable(filtered) else filtered
        own = model_data.instructions
        return ModelInputData(input=model_data.input, instructions=f"{own}\n\n{extra}" if own else extra)

    return add_instructions


class TurnRunConfig:
    """Builds the run configuration of each turn from the runner's and the turn's session settings.

    Args:
        base: The runner's run configuration.
        model_for_settings: Chooses the turn's model, or `None`.
        instructions_for_settings: Adds instructions to the turn's model calls, or `None`.
    """

    def __init__(
        self,
        base: RunConfig,
        model_for_settings: ModelForSettings | None,
        instructions_for_settings: InstructionsForSettings | None,
    ) -> None:
        self._base = base
        self._model_for_settings = model_for_settings
        self._instructions_for_settings = instructions_for_settings

    def for_settings(self, settings: Mapping[str, object]) -> RunConfig:
        """Return the run configuration of a turn that started with ``settings``.

        Raises:
            SessionSettingsError: If a settings hook raised or returned something the SDK cannot use.
        """
        if self._model_for_settings is None and self._instructions_for_settings is None:
            return self._base
        try:
            # Typed as the hooks promise; checked as what user code may really return.
            chosen = cast(object, self._model_for_settings(settings) if self._model_for_settings else None)
            instructions = cast(
                object, self._instructions_for_settings(settings) if self._instructions_for_settings else None
            )
        except Exception as error:
            raise SessionSettingsError(f"{type(error).__name__}: {error}") from error
        if chosen is not None and not isinstance(chosen, Model) and not (isinstance(chosen, str) and chosen):
            raise SessionSettingsError(
                f"model_for_settings returned {chosen!r}; return a model name, an agents.Model or None"
            )
        if instructions is not None and not isinstance(instructions, str):
            raise SessionSettingsError(
                f"instructions_for_settings returned {type(instructions).__name__}; return text or None"
            )
        config = self._base
        if isinstance(chosen, (Model, str)):
            config = dataclasses.replace(config, model=chosen)
        if instructions:
            added = _with_instructions(config.call_model_input_filter, instructions)
            config = dataclasses.replace(config, call_model_input_filter=added)
        return config
