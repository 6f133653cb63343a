"""The MCP SDK release `dex_agents.mcp` needs, checked before anything imports it."""

from __future__ import annotations

import importlib.metadata
import re

__all__ = ["require_mcp_sdk"]

_OLDEST = (2, 3)
_NEXT_MAJOR = (3, 0)


def require_mcp_sdk() -> None:
    """Raise an `ImportError` naming the install command unless mcp 2.3 or a later 2.x is installed.

    mcp 1.x has neither the ``Client`` nor the 2026-07-28 protocol this package uses, so it must not be
    picked up, as it is in an environment that pins it for another library.

    Raises:
        ImportError: If mcp is missing, older than 2.3, or 3.0 or newer.
    """
    try:
        version = importlib.metadata.version("mcp")
        import mcp  # noqa: F401, PLC0415  # pyright: ignore[reportUnusedImport]
    except (importlib.metadata.PackageNotFoundError, ImportError):
        found = "mcp is not installed"
    else:
        numbers = tuple(int(part) for part in re.findall(r"\d+", version)[:2])
        if _OLDEST <= numbers < _NEXT_MAJOR:
            return
        found = f"mcp {version} is installed"
    raise ImportError(
        f"dex_agents.mcp needs the MCP SDK, mcp 2.3 or a later 2.x, and {found}: "
        'pip install "dex-agents[mcp]"'
    )


require_mcp_sdk()
