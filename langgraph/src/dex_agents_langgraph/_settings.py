"""How a turn's session settings choose the chat model and the instructions of its model Steps."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeAlias

from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel

__all__ = ["InstructionsForSettings", "ModelForSettings", "SettingsChoice"]

ModelForSettings: TypeAlias = Callable[[Mapping[str, object]], BaseChatModel | str | None]
"""Chooses a turn's chat model from its session settings: a model, a name for `init_chat_model`
(``"openai:gpt-5"``), or `None` to keep the graph's own model."""

InstructionsForSettings: TypeAlias = Callable[[Mapping[str, object]], str | None]
"""Returns instructions a turn adds to the agent's system message, from its session settings; `None` adds
none."""


class SettingsChoice:
    """Asks the application's hooks what a turn runs with, keeping one chat model per name and Worker.

    Args:
        model_for_settings: The runner's model hook, if any.
        instructions_for_settings: The runner's instructions hook, if any.
    """

    def __init__(
        self,
        model_for_settings: ModelForSettings | None,
        instructions_for_settings: InstructionsForSettings | None,
    ) -> None:
        self._model_for_settings = model_for_settings
        self._instructions_for_settings = instructions_for_settings
        self._models_by_name: dict[str, BaseChatModel] = {}

    def model(self, settings: Mapping[str, object]) -> BaseChatModel | None:
        """The turn's chat model, or `None` to keep the graph's own.

        Raises:
            TypeError: If the hook returns neither a chat model, its name nor `None`. Whatever the hook
                or `init_chat_model` raises propagates.
        """
        chosen = None if self._model_for_settings is None else self._model_for_settings(settings)
        if chosen is None or isinstance(chosen, BaseChatModel):
            return chosen
        if not isinstance(chosen, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            kind = type(chosen).__name__
            raise TypeError(f"model_for_settings returned {kind}, not a chat model or its name")
        model = self._models_by_name.get(chosen)
        if model is None:
            # One client per model name and Worker, as a graph built once would have.
            model = self._models_by_name[chosen] = init_chat_model(chosen)
        return model

    def instructions(self, settings: Mapping[str, object]) -> str | None:
        """The instructions the turn adds, or `None`.

        Raises:
            TypeError: If the hook returns something other than text or `None`.
        """
        instructions = (
            None if self._instructions_for_settings is None else self._instructions_for_settings(settings)
        )
        if instructions is not None and not isinstance(instructions, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"instructions_for_settings returned {type(instructions).__name__}, not text")
        return instructions
