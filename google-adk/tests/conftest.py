"""Test-process settings that must hold before any test module imports LiteLLM."""

import os

# LiteLLM downloads its model cost map on import unless told otherwise: on a machine without network that
# is ten seconds of retries in every process that imports it (ADK's LiteLlm does, in the provider tests).
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
