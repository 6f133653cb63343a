"""The one place Stepwise imports LiteLLM, so a missing extra fails with the line that installs it."""

from __future__ import annotations

import os

__all__ = ["INSTALL_HINT", "litellm"]

INSTALL_HINT = 'pip install "dex-agents[stepwise]"'
"""The command that installs Stepwise's dependencies."""

# Without this, importing LiteLLM downloads its model price map from GitHub, retrying for seconds when the
# network is slow or closed. A Worker should start the same way every time, from the map in the pinned
# wheel; an application that wants the live map sets the variable to anything but "true" before import.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

try:
    import litellm
except ImportError as error:  # pragma: no cover - exercised in a subprocess without LiteLLM
    raise ImportError(f"dex_agents.stepwise needs LiteLLM, which is not installed: {INSTALL_HINT}") from error
