"""The installed release of dex-agents, which a Worker logs when it starts and tracing reports."""

from __future__ import annotations

import importlib.metadata

__all__ = ["UNKNOWN_VERSION", "installed_version"]

UNKNOWN_VERSION = "0+unknown"
"""The version of a dex_agents imported from a source tree that was never installed."""


def installed_version() -> str:
    """Return the installed version of the ``dex-agents`` distribution, or `UNKNOWN_VERSION`."""
    try:
        return importlib.metadata.version("dex-agents")
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN_VERSION
