"""Session settings: stored at start, replaced by `update_session_settings`, copied into each starting turn.

Settings change at turn boundaries only. The Step that starts a turn copies `SessionSettings` into
`TurnSessionSettings` in the same commit, and `RunModel` and `CompactContext` read only that copy, so a
running turn, its retries included, keeps the settings it started with.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import cast

from dex import Context

from dex_agents.limits import MAX_SESSION_SETTINGS_BYTES, SESSION_SETTINGS_SIZE_TOLERANCE_BYTES, utf8_size
from dex_agents.persistence import SESSION_SETTINGS, TURN_SESSION_SETTINGS
from dex_agents.values import TurnSessionSettings

__all__ = [
    "INVALID_START_SETTINGS_REASON",
    "copy_settings_into_turn",
    "read_session_settings",
    "read_turn_session_settings",
    "session_settings_problem",
    "store_session_settings",
]

#: How the force-fail reason of a session whose start input carries settings it refuses begins.
INVALID_START_SETTINGS_REASON = (
    "dex-agents: the start input's session_settings are not valid session settings"
)

_NO_SETTINGS: Mapping[str, object] = MappingProxyType({})


def session_settings_problem(
    settings: object, max_bytes: int = MAX_SESSION_SETTINGS_BYTES + SESSION_SETTINGS_SIZE_TOLERANCE_BYTES
) -> str | None:
    """Return why ``settings`` cannot be session settings, or `None` when they can.

    Settings are a JSON object whose compact JSON text is at most ``max_bytes`` of UTF-8. Clients check
    against `MAX_SESSION_SETTINGS_BYTES`; the session accepts `SESSION_SETTINGS_SIZE_TOLERANCE_BYTES` more.

    Args:
        settings: The candidate settings.
        max_bytes: The largest size accepted.

    Returns:
        The problem, or `None`.
    """
    if not isinstance(settings, dict):
        return f"session settings must be a JSON object, got {type(settings).__name__}"
    names = cast(dict[object, object], settings)
    wrong = next((name for name in names if not isinstance(name, str)), None)
    if wrong is not None:
        return f"session settings names must be text, got {wrong!r}"
    try:
        text = json.dumps(settings, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        return f"session settings must hold only JSON values: {error}"
    size = utf8_size(text)
    if size > max_bytes:
        return (
            f"session settings are {size} bytes of compact JSON, more than the {max_bytes}-byte limit; keep "
            "references in them (a model name, an instructions ID) and resolve them in the Worker"
        )
    return None


def read_session_settings(context: Context) -> dict[str, object] | None:
    """Return the settings the next turn starts with, or `None` when there are none."""
    settings = cast(dict[str, object] | None, SESSION_SETTINGS.get(context))
    return settings or None


def store_session_settings(context: Context, settings: Mapping[str, object]) -> None:
    """Replace the settings the next turn starts with; empty settings delete them."""
    if settings:
        SESSION_SETTINGS.set(context, dict(settings))
    else:
        SESSION_SETTINGS.delete(context)


def copy_settings_into_turn(context: Context, turn_id: str) -> None:
    """Give a starting turn the current settings, in the commit that starts it."""
    settings = read_session_settings(context)
    if settings:
        TURN_SESSION_SETTINGS.set(context, TurnSessionSettings(turn_id=turn_id, session_settings=settings))
    elif cast(TurnSessionSettings | None, TURN_SESSION_SETTINGS.get(context)) is not None:
        TURN_SESSION_SETTINGS.delete(context)


def read_turn_session_settings(context: Context, turn_id: str) -> Mapping[str, object]:
    """Return the settings ``turn_id`` started with; a copy of another turn reads as none."""
    copy = cast(TurnSessionSettings | None, TURN_SESSION_SETTINGS.get(context))
    if copy is None or copy.turn_id != turn_id:
        return _NO_SETTINGS
    return MappingProxyType(dict(copy.session_settings))
