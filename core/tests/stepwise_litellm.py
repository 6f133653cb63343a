"""LiteLLM's own types for the Stepwise tests, imported only after `dex_agents.stepwise`.

Importing LiteLLM first would start it with its defaults, which fetch its model price map over the network;
Stepwise starts it with the map in the pinned wheel, and the tests start it exactly as Stepwise does.
"""

# ruff: noqa: I001 - the import order is the point of this module.
import dex_agents.stepwise  # noqa: F401  # pyright: ignore[reportUnusedImport]
from litellm.llms.custom_llm import CustomLLM
from litellm.types.utils import (
    ChatCompletionDeltaToolCall,
    Delta,
    Function,
    ModelResponseStream,
    StreamingChoices,
)

__all__ = [
    "ChatCompletionDeltaToolCall",
    "CustomLLM",
    "Delta",
    "Function",
    "ModelResponseStream",
    "StreamingChoices",
]
