"""The one patch of SDK internals dex-agents applies, and only for a Worker built by `AgentWorker`.

``dex-python-sdk`` 1.23.0 opens a new pull stream for most tasks (a stream carries one task at a time, and
the Worker retires a stream that finished a task once a fresh idle one has registered). Every stream opens
with a registration frame that names the SDK's version, and ``dex._pull_worker`` looks that version up
with ``importlib.metadata.version("dex-python-sdk")`` each time: a scan of ``sys.path`` for the package's
metadata. In a profile of a busy Worker that lookup was 23% of its CPU. The version cannot change while
the process runs, so the patch replaces the pull module's reference with a cached copy of the same
function: the registration frames carry exactly the same text.

It is applied by `AgentWorker` (never on import), it changes one module attribute, and it is applied only
to the SDK version it was written against: with any other version it does nothing and says so once in the
log. ``tests/test_unit_sdk_patches.py`` pins that version and the internals the patch relies on, so an SDK
upgrade fails the test suite loudly instead of silently losing or breaking the patch.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from importlib import metadata

__all__ = ["PATCHED_SDK_VERSION", "apply_sdk_patches", "is_sdk_version_lookup_cached"]

PATCHED_SDK_VERSION = "1.23.0"
"""The ``dex-python-sdk`` release the patch was written for."""

_logger = logging.getLogger(__name__)
_lock = threading.Lock()


def _installed_sdk_version() -> str | None:
    try:
        return metadata.version("dex-python-sdk")
    except metadata.PackageNotFoundError:
        return None


def is_sdk_version_lookup_cached() -> bool:
    """Whether the pull module's version lookup is the cached one."""
    from dex import _pull_worker  # noqa: PLC0415 - SDK internals, read only when asked

    return getattr(getattr(_pull_worker, "sdk_version", None), "__wrapped__", None) is not None


def apply_sdk_patches() -> bool:
    """Cache the SDK's version lookup in its pull module; safe to call any number of times.

    Returns:
        Whether the lookup is cached now. `False` when the installed SDK is not `PATCHED_SDK_VERSION` or
        its pull module no longer has the lookup; the Worker then runs unpatched, as the SDK ships it.
    """
    with _lock:
        if is_sdk_version_lookup_cached():
            return True
        installed = _installed_sdk_version()
        from dex import _pull_worker  # noqa: PLC0415 - SDK internals, touched only when patching

        lookup: object = getattr(_pull_worker, "sdk_version", None)
        if installed != PATCHED_SDK_VERSION or not callable(lookup):
            _logger.info(
                "dex-agents leaves the SDK unpatched: it caches the version lookup of dex-python-sdk %s, "
                "and %s is installed",
                PATCHED_SDK_VERSION,
                installed,
            )
            return False
        original: Callable[[], str] = lookup  # pyright: ignore[reportAssignmentType]
        setattr(_pull_worker, "sdk_version", functools.cache(original))  # noqa: B010 - a private name
        return True
