"""LiteLLM's own types for the Stepwise tests, and the stream chunks a test provider sends.

LiteLLM is imported only after `dex_agents.stepwise`: importing it first would start it with its defaults,
which fetch its model price map over the network; Stepwise starts it with the map in the pinned wheel, and
the tests start it exactly as Stepwise does.
"""

# ruff: noqa: I001 - the import order is the point of this module.
import copy
from collections.abc import AsyncIterator, Sequence
from typing import Any

from dex_agents.stepwise import LiteLLMModelClient
from dex_agents.stepwise._litellm import litellm

from litellm.llms.custom_llm import CustomLLM
from litellm.types.utils import (
    ChatCompletionDeltaToolCall,
    Delta,
    Function,
    ModelResponseStream,
    StreamingChoices,
)

__all__ = ["CHUNK_MODEL", "ChunkModel", "CustomLLM", "chunk", "chunk_model", "tool_delta", "usage_chunk"]


class ChunkModel(CustomLLM):
    """A provider that streams the chunks a test gives it, for what a script cannot express.

    Each model name has its answers, one list of chunks per call; the last answer repeats. Each call's
    messages, as LiteLLM hands them to a provider, are kept in `requests`, and its request options (the
    tools, the tool choice, ...) in `options`.
    """

    def __init__(self) -> None:
        super().__init__()
        self.answers: dict[str, list[list[object]]] = {}
        self.requests: dict[str, list[list[dict[str, Any]]]] = {}
        self.options: dict[str, list[dict[str, Any]]] = {}

    async def astreaming(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, model: str, messages: list[Any], *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """Stream the model's next answer."""
        self.requests.setdefault(model, []).append(copy.deepcopy(messages))
        self.options.setdefault(model, []).append(copy.deepcopy(dict(kwargs.get("optional_params") or {})))
        answers = self.answers[model]
        for piece in answers.pop(0) if len(answers) > 1 else answers[0]:
            yield piece


CHUNK_MODEL = ChunkModel()
litellm.custom_provider_map.append({"provider": "dex-test-chunks", "custom_handler": CHUNK_MODEL})


def chunk_model(
    name: str,
    *chunks: object,
    answers: Sequence[Sequence[object]] = (),
    forced_tool_choice: bool | None = None,
) -> LiteLLMModelClient:
    """A client for ``dex-test-chunks/<name>``, which answers ``chunks``, or each of ``answers`` in turn."""
    CHUNK_MODEL.answers[name] = [list(answer) for answer in answers] or [list(chunks)]
    CHUNK_MODEL.requests[name] = []
    CHUNK_MODEL.options[name] = []
    return LiteLLMModelClient(f"dex-test-chunks/{name}", forced_tool_choice=forced_tool_choice)


def chunk(**delta: Any) -> ModelResponseStream:
    """A stream chunk whose delta has ``delta``'s fields, such as ``content`` or ``reasoning_content``."""
    return ModelResponseStream(choices=[StreamingChoices(index=0, delta=Delta(**delta))])


def tool_delta(index: int, tool_call_id: str | None, name: str | None, arguments: str) -> ModelResponseStream:
    """A stream chunk with one piece of the tool call at ``index``."""
    call = ChatCompletionDeltaToolCall(
        id=tool_call_id, index=index, type="function", function=Function(name=name, arguments=arguments)
    )
    return chunk(tool_calls=[call])


def usage_chunk(
    prompt: int, completion: int, *, cached: int = 0, reasoning: int = 0, finish: str = "stop"
) -> dict[str, object]:
    """The last chunk, in LiteLLM's generic form, whose usage it takes from a custom provider as given."""
    return {
        "text": "",
        "tool_use": None,
        "is_finished": True,
        "finish_reason": finish,
        "index": 0,
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning},
        },
    }
