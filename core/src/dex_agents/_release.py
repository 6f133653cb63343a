"""The installed release of dex-agents, which a Worker logs when it starts and tracing reports."""

from __future__ import annotations

import functools
import importlib.metadata

__all__ = ["UNKNOWN_VERSION", "installed_version"]

UNKNOWN_VERSION = "0+unknown"
"""The version of a dex_agents imported from a source tree that was never installed."""


@functools.cache  # every turn records it; the metadata of an installed package does not change under it
def installed_version() -> str:
    """Return the installed version of the ``dex-agents`` distribution, or `UNKNOWN_VERSION`."""
    try:
        return importlib.metadata.version("dex-agents")
    except importlib.metadata.PackageNotFoundError:
        return UNKNOWN_VERSION
