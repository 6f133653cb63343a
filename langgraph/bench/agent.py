"""The benchmark's agent: two model calls around one read tool, with a deterministic scripted model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from dex_agents import AgentSessionFlow, AgentSessionOptions, ToolEffect, ToolPolicy
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage, ToolCallChunk, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph

from dex_agents_langgraph import DexCheckpointSaver, DexToolGate, LangGraphRunner


@tool
async def lookup_order(order_id: str) -> str:
    """Look up an order."""
    return json.dumps({"order_id": order_id, "status": "shipped"})


class BenchModel(BaseChatModel):
    """Asks for the lookup, then answers once the lookup's result is in its input."""

    @property
    def _llm_type(self) -> str:
        return "bench"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Runnable[Any, Any]:
        return self.bind(**kwargs)

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        raise NotImplementedError("the benchmark model only streams")

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        usage = UsageMetadata(input_tokens=20, output_tokens=8, total_tokens=28)
        if any(isinstance(message, ToolMessage) for message in messages):
            yield ChatGenerationChunk(message=AIMessageChunk(content="Order A-1 "))
            yield ChatGenerationChunk(
                message=AIMessageChunk(content="has shipped.", usage_metadata=usage, chunk_position="last")
            )
            return
        call = ToolCallChunk(
            name="lookup_order", args=json.dumps({"order_id": "A-1"}), id="lookup-1", index=0
        )
        yield ChatGenerationChunk(message=AIMessageChunk(content="Let me look that up."))
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="", tool_call_chunks=[call], usage_metadata=usage, chunk_position="last"
            )
        )


def build_agent(
    checkpointer: BaseCheckpointSaver[Any] | None = None, middleware: Sequence[AgentMiddleware] = ()
) -> CompiledStateGraph[Any, Any, Any, Any]:
    return create_agent(BenchModel(), tools=[lookup_order], middleware=middleware, checkpointer=checkpointer)


def build_durable_agent(checkpointer: DexCheckpointSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
    return build_agent(checkpointer, middleware=[DexToolGate()])


def build_flow() -> AgentSessionFlow:
    return AgentSessionFlow(
        LangGraphRunner(build_durable_agent),
        flow_type="LangGraphBench",
        options=AgentSessionOptions(tool_policies={"lookup_order": ToolPolicy(ToolEffect.READ)}),
    )
