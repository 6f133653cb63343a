"""What one SDK run reports while a `RunModel` Step drives it.

Streamed text and reasoning deltas become the session's live events; run hooks count the model calls
(one per agent when the run hands off), keep each call's usage and what tracing reports about it (the
settings, instructions and tools of its request, and when its stream produced its first event), and stop
any model call a Step must not make; each handoff becomes an `openai_agents.handoff` event.
"""

from __future__ import annotations

import inspect
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from agents import (
    Agent,
    Handoff,
    Model,
    ModelResponse,
    ModelSettings,
    RawResponsesStreamEvent,
    RunConfig,
    RunContextWrapper,
    RunHooks,
    StreamEvent,
    TResponseInputItem,
    handoff,
)
from dex_agents.events import AgentEventWriter
from dex_agents.runner import ModelCallMetadata, ModelToolDescription
from dex_agents.values import AgentUsage
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseReasoningSummaryTextDeltaEvent,
    ResponseReasoningTextDeltaEvent,
    ResponseTextDeltaEvent,
)

from dex_agents_openai_agents._call_metadata import CallRequest, model_call_metadata, tool_descriptions
from dex_agents_openai_agents._gate import offered_tools

__all__ = ["HANDOFF_EVENT_TYPE", "StepHooks", "UnexpectedModelCallError", "forward_stream_event"]

_logger = logging.getLogger(__name__)

HANDOFF_EVENT_TYPE = "openai_agents.handoff"
"""The live event written for each handoff inside a `RunModel` Step."""


class UnexpectedModelCallError(Exception):
    """The SDK was about to make a second model call in one Step without a handoff."""


def forward_stream_event(event: StreamEvent, events: AgentEventWriter) -> None:
    """Write a text or reasoning delta of ``event`` as a live event; ignore everything else."""
    if not isinstance(event, RawResponsesStreamEvent):
        return
    data = event.data
    if isinstance(data, ResponseTextDeltaEvent):
        events.write_text_delta(data.delta)
    elif isinstance(data, (ResponseReasoningSummaryTextDeltaEvent, ResponseReasoningTextDeltaEvent)):
        events.write_reasoning_delta(data.delta)


@dataclass
class _ModelCall:
    agent_name: str
    usage: AgentUsage
    model: str | Model | None
    started: float
    settings: ModelSettings | None = None
    instructions: str | None = None
    tools: list[ModelToolDescription] = field(default_factory=list[ModelToolDescription])
    first_event: float | None = None
    cache_creation_input_tokens: int | None = None
    response: ModelResponse | None = None

    def request(self) -> CallRequest:
        return CallRequest(
            settings=self.settings,
            tools=self.tools,
            system_instructions=self.instructions or None,
            time_to_first_chunk_seconds=None if self.first_event is None else self.first_event - self.started,
            cache_creation_input_tokens=self.cache_creation_input_tokens,
        )


async def _enabled_handoffs(agent: Agent[Any], context: RunContextWrapper[Any]) -> list[Handoff[Any, Any]]:
    """The agent's handoffs the SDK offers its model call: those enabled for this run, as the SDK decides."""
    enabled: list[Handoff[Any, Any]] = []
    for item in agent.handoffs:
        offered = item if isinstance(item, Handoff) else handoff(item)
        decision = offered.is_enabled
        if not isinstance(decision, bool):
            result = decision(context, agent)
            decision = bool(await result) if inspect.isawaitable(result) else bool(result)
        if decision:
            enabled.append(offered)
    return enabled


def _usage(response: ModelResponse) -> AgentUsage:
    usage = response.usage
    return AgentUsage(
        model_calls=1,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cached_input_tokens=usage.input_tokens_details.cached_tokens or 0,
        reasoning_tokens=usage.output_tokens_details.reasoning_tokens or 0,
    )


@dataclass
class StepHooks(RunHooks[Any]):
    """Counts model calls and handoffs, and stops any model call a Step must not make.

    Attributes:
        run_config: The Step's run configuration: its model, when set, replaces every agent's own, and
            its provider resolves model names.
    """

    run_config: RunConfig
    calls: list[_ModelCall] = field(default_factory=list[_ModelCall])
    handoffs: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    _handoff_pending: bool = False
    _last_streamed: Response | None = None

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Agent[Any],
        system_prompt: str | None,
        input_items: list[TResponseInputItem],
    ) -> None:
        if self.calls and not self._handoff_pending:
            raise UnexpectedModelCallError(
                f"the OpenAI Agents SDK was about to make a second model call for agent {agent.name!r} "
                "inside one model Step, without a handoff; the runner stopped it. This happens when the "
                "model repeats a tool call ID of an earlier call in the same turn, which the SDK skips"
            )
        self._handoff_pending = False
        try:
            tools = tool_descriptions(offered_tools(agent.name), await _enabled_handoffs(agent, context))
        except Exception:
            # A handoff's `is_enabled` is the application's code; tracing never fails a model call over it.
            _logger.warning("the tools offered to agent %r could not be described for tracing", agent.name)
            tools = []
        model = self.run_config.model if self.run_config.model is not None else agent.model
        self.calls.append(
            _ModelCall(
                agent.name,
                AgentUsage(),
                model,
                # The SDK starts the model's stream right after this hook.
                time.perf_counter(),
                # As the SDK resolves them: the run configuration's settings over the agent's.
                settings=agent.model_settings.resolve(self.run_config.model_settings),
                instructions=system_prompt,
                tools=tools,
            )
        )

    async def on_llm_end(
        self, context: RunContextWrapper[Any], agent: Agent[Any], response: ModelResponse
    ) -> None:
        self.calls[-1].usage = _usage(response)
        self.calls[-1].response = response
        written = getattr(response.usage.input_tokens_details, "cache_write_tokens", None)
        if isinstance(written, int) and written > 0:
            self.calls[-1].cache_creation_input_tokens = written

    async def on_handoff(
        self, context: RunContextWrapper[Any], from_agent: Agent[Any], to_agent: Agent[Any]
    ) -> None:
        self.handoffs.append((from_agent.name, to_agent.name))
        self._handoff_pending = True

    def observe(self, event: StreamEvent) -> None:
        """Note when the current call's stream began and keep its `ResponseCompletedEvent`'s response."""
        if not isinstance(event, RawResponsesStreamEvent):
            return
        if self.calls and self.calls[-1].first_event is None:
            self.calls[-1].first_event = time.perf_counter()
        if isinstance(event.data, ResponseCompletedEvent):
            self._last_streamed = event.data.response

    def model_call_metadata(self) -> ModelCallMetadata | None:
        """What tracing reports about the Step's last model call; `None` when it made none.

        With a handoff the Step makes several calls; the last one answered, so it names the span.
        """
        if not self.calls:
            return None
        last = self.calls[-1]
        return model_call_metadata(
            last.model, self.run_config.model_provider, self._last_streamed, last.request()
        )

    @property
    def last_response(self) -> ModelResponse | None:
        """The response of the Step's last model call, once it ended."""
        return self.calls[-1].response if self.calls else None

    def total_usage(self) -> AgentUsage:
        """The usage of every model call of the Step."""
        total = AgentUsage()
        for call in self.calls:
            total = total.plus(call.usage)
        return total

    def write_handoff_events(self, events: AgentEventWriter) -> None:
        """Write one `HANDOFF_EVENT_TYPE` event per handoff, with every model call's usage."""
        calls = [{"agent": call.agent_name, **asdict(call.usage)} for call in self.calls]
        for source, target in self.handoffs:
            events.write_event(
                HANDOFF_EVENT_TYPE, {"source_agent": source, "target_agent": target, "model_calls": calls}
            )
