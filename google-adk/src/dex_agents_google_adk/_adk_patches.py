"""The one work-around of ADK internals the adapter applies, when a `GoogleAdkRunner` is built.

**The failing optional import.** For every invocation, ADK 2.13's ``workflow.utils._workflow_graph_utils
.build_node`` tries ``from ...agents.remote_a2a_agent import RemoteA2aAgent`` and passes on `ImportError`.
Without the optional ``a2a`` package that import fails, and Python keeps no record of a failed import, so
every invocation reads, compiles (where no bytecode cache was written, as in images that set
``PYTHONDONTWRITEBYTECODE``) and runs two modules again before failing the same way. Each model Step and
each tool Step is an invocation here. Measured on the benchmark's turn in process: 34 ms of CPU instead of
9 ms without a bytecode cache, 11.5 instead of 9 ms with one.

The work-around records the import's outcome once: when ``a2a`` cannot be found, the module's entry in
`sys.modules` becomes `None`, which makes Python raise `ImportError` for it at once, exactly as it ends
now, without the work. With ``a2a`` installed, or with an ADK version other than the one it was written
for, it changes nothing (and says so once in the log for another version); ``tests/test_adk_patches.py``
pins that version and the ADK source it relies on. Importing the adapter patches nothing.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import sys
from typing import cast

from google.adk.version import __version__ as adk_version

__all__ = ["A2A_AGENT_MODULE", "PATCHED_ADK_VERSION", "skip_failing_a2a_import"]

PATCHED_ADK_VERSION = "2.13.0"
"""The ADK release the work-around was written for."""

A2A_AGENT_MODULE = "google.adk.agents.remote_a2a_agent"
"""The module ADK tries to import for every invocation."""

_logger = logging.getLogger(__name__)


@functools.cache
def _say_not_applied() -> None:
    _logger.info(
        "google-adk %s is not the release dex-agents-google-adk's import work-around was written for (%s); "
        "it is not applied",
        adk_version,
        PATCHED_ADK_VERSION,
    )


def skip_failing_a2a_import() -> bool:
    """Make ADK's per-invocation import of `RemoteA2aAgent` fail at once when it cannot succeed.

    Returns:
        Whether the import is now marked as failing (also when an earlier call marked it).
    """
    if adk_version != PATCHED_ADK_VERSION:
        _say_not_applied()
        return False
    if A2A_AGENT_MODULE in sys.modules:
        # typeshed types `sys.modules` without the `None` entries Python itself honours.
        return cast(object, sys.modules[A2A_AGENT_MODULE]) is None
    if importlib.util.find_spec("a2a") is not None:
        return False  # The import succeeds once, and Python keeps the module.
    sys.modules[A2A_AGENT_MODULE] = None  # pyright: ignore[reportArgumentType]
    return True
