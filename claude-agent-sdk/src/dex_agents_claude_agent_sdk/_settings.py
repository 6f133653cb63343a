"""Session settings into a run's options: the turn's model, and instructions added to its system prompt.

The CLI keeps the system prompt a session recorded on its first request (the SDK's `snapshot`, true
unless said otherwise) and sends that one on every resumed run, so instructions that change between turns
would never reach the model. A runner with `instructions_for_settings` therefore asks for the prompt to be
rebuilt on every run (`snapshot: False`), whatever the hook returns this turn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TypeAlias, cast

from claude_agent_sdk import ClaudeAgentOptions
from claude_agent_sdk.types import SystemPromptCustom, SystemPromptPreset

__all__ = ["InstructionsForSettings", "ModelForSettings", "SessionSettingsError", "options_for_settings"]

ModelForSettings: TypeAlias = Callable[[Mapping[str, object]], str | None]
"""Chooses a turn's model from its session settings; `None` keeps `ClaudeAgentOptions.model`."""

InstructionsForSettings: TypeAlias = Callable[[Mapping[str, object]], str | None]
"""Returns instructions a turn adds to the system prompt, from its session settings; `None` adds none."""


class SessionSettingsError(ValueError):
    """A settings hook raised, or chose something the options cannot take; the turn ends saying so."""


def options_for_settings(
    options: ClaudeAgentOptions,
    settings: Mapping[str, object],
    *,
    model_for_settings: ModelForSettings | None,
    instructions_for_settings: InstructionsForSettings | None,
) -> ClaudeAgentOptions:
    """Return ``options`` with the model and instructions the turn's settings choose.

    Args:
        options: The run's options before the settings.
        settings: The settings the turn started with.
        model_for_settings: The runner's model hook, if any.
        instructions_for_settings: The runner's instructions hook, if any.

    Returns:
        The options to run with (``options`` itself when there is no hook).

    Raises:
        SessionSettingsError: If a hook raised, returned something other than text or `None`, or
            instructions meet a system prompt file, which cannot be added to.
    """
    if model_for_settings is None and instructions_for_settings is None:
        return options
    try:
        model = None if model_for_settings is None else model_for_settings(settings)
        instructions = None if instructions_for_settings is None else instructions_for_settings(settings)
    except Exception as error:
        # The settings stay the same on every attempt of the turn, so a retry would fail alike.
        raise SessionSettingsError(
            f"the session settings chose no usable model or instructions: {type(error).__name__}: {error}"
        ) from error
    for name, value in (("model_for_settings", model), ("instructions_for_settings", instructions)):
        if value is not None and not isinstance(value, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise SessionSettingsError(
                f"the session settings chose no usable model or instructions: {name} returned "
                f"{type(value).__name__}, not text or None"
            )
    if model:
        options = dataclasses.replace(options, model=model)
    if instructions_for_settings is not None:
        prompt = _rebuilt_system_prompt(options.system_prompt, instructions)
        options = dataclasses.replace(options, system_prompt=prompt)
    return options


def _rebuilt_system_prompt(
    prompt: object, instructions: str | None
) -> SystemPromptCustom | SystemPromptPreset:
    """The system prompt with ``instructions`` after it, rebuilt by the CLI on every run."""
    addition = instructions or ""
    if prompt is None or isinstance(prompt, str):
        return {"type": "custom", "prompt": _joined(prompt or "", addition), "snapshot": False}
    fields = cast(Mapping[str, object], prompt)
    kind = fields.get("type")
    if kind == "custom":
        return {
            "type": "custom",
            "prompt": _joined(str(fields.get("prompt", "")), addition),
            "snapshot": False,
        }
    if kind == "preset":
        preset = cast(SystemPromptPreset, dict(fields))
        appended = _joined(str(fields.get("append", "")), addition)
        if appended:
            preset["append"] = appended
        preset["snapshot"] = False
        return preset
    raise SessionSettingsError(
        f"the session settings chose no usable model or instructions: instructions_for_settings cannot add "
        f"to a system prompt of type {kind!r}; give ClaudeAgentOptions.system_prompt as text, a 'custom' "
        "or a 'preset' prompt"
    )


def _joined(prompt: str, addition: str) -> str:
    return "\n\n".join(part for part in (prompt, addition) if part)
