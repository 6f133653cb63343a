"""The attribute names of the GenAI semantic conventions versions `AgentTracing` emits, and Dex's own.

The default follows open-telemetry/semantic-conventions-genai at commit
dc3571562603552dc555c667dfa327a638d94ab2 (schema 1.42.0-dev). The compatibility value is OpenTelemetry
semantic conventions 1.36.0, the last release before GenAI moved to its own repository: it names the
provider ``gen_ai.system`` (with its own spelling of three providers), and it has no cache or reasoning
token attributes, no ``gen_ai.input.messages`` / ``gen_ai.output.messages`` and no tool call content
attributes (1.36.0 recorded content as log events, which this package does not emit).
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "DEX_AGENT_INPUT_COUNT",
    "DEX_AGENT_INPUT_FIRST_KEY",
    "DEX_AGENT_INPUT_LAST_KEY",
    "DEX_AGENT_OUTPUT_COUNT",
    "DEX_AGENT_OUTPUT_FIRST_KEY",
    "DEX_AGENT_OUTPUT_LAST_KEY",
    "DEX_AGENT_TOOL_CALL_IDS",
    "DEX_AGENT_TURN_ID",
    "DEX_FLOW_ID",
    "DEX_RUN_ID",
    "DEX_STEP_ATTEMPT",
    "DEX_STEP_EXECUTION_ID",
    "DEX_STEP_TYPE",
    "DEX_TOOL_EFFECT",
    "DEX_TOOL_STATUS",
    "ERROR_TYPE",
    "GEN_AI_AGENT_NAME",
    "GEN_AI_CONVERSATION_ID",
    "GEN_AI_INPUT_MESSAGES",
    "GEN_AI_OPERATION_NAME",
    "GEN_AI_OUTPUT_MESSAGES",
    "GEN_AI_PROVIDER_NAME",
    "GEN_AI_REQUEST_FREQUENCY_PENALTY",
    "GEN_AI_REQUEST_MAX_TOKENS",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_REQUEST_PRESENCE_PENALTY",
    "GEN_AI_REQUEST_STOP_SEQUENCES",
    "GEN_AI_REQUEST_STREAM",
    "GEN_AI_REQUEST_TEMPERATURE",
    "GEN_AI_REQUEST_TOP_P",
    "GEN_AI_RESPONSE_FINISH_REASONS",
    "GEN_AI_RESPONSE_ID",
    "GEN_AI_RESPONSE_MODEL",
    "GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK",
    "GEN_AI_SYSTEM",
    "GEN_AI_SYSTEM_INSTRUCTIONS",
    "GEN_AI_TOOL_CALL_ARGUMENTS",
    "GEN_AI_TOOL_CALL_ID",
    "GEN_AI_TOOL_CALL_RESULT",
    "GEN_AI_TOOL_DEFINITIONS",
    "GEN_AI_TOOL_DESCRIPTION",
    "GEN_AI_TOOL_NAME",
    "GEN_AI_TOOL_TYPE",
    "GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS",
    "GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
    "GEN_AI_USAGE_REASONING_OUTPUT_TOKENS",
    "SERVER_ADDRESS",
    "SERVER_PORT",
    "SESSION_ID",
    "GenAIConventions",
    "provider_attribute",
]


class GenAIConventions(StrEnum):
    """Which GenAI semantic conventions the spans follow."""

    #: semantic-conventions-genai at dc3571562603552dc555c667dfa327a638d94ab2, schema 1.42.0-dev (default).
    LATEST = "1.42.0-dev"
    #: OpenTelemetry semantic conventions 1.36.0, for backends that still read ``gen_ai.system``.
    V1_36_0 = "1.36.0"

    @property
    def schema_url(self) -> str | None:
        """The schema URL of a released version; a development schema has no published URL."""
        return "https://opentelemetry.io/schemas/1.36.0" if self is GenAIConventions.V1_36_0 else None

    @property
    def has_content_attributes(self) -> bool:
        """Whether message and tool call content can be recorded as span attributes."""
        return self is GenAIConventions.LATEST

    @property
    def has_streaming_attributes(self) -> bool:
        """Whether ``gen_ai.request.stream`` and ``gen_ai.response.time_to_first_chunk`` exist."""
        return self is GenAIConventions.LATEST

    @property
    def has_token_detail_attributes(self) -> bool:
        """Whether cache-read, cache-creation and reasoning-output token counts have attributes."""
        return self is GenAIConventions.LATEST


# GenAI conventions, present in both versions unless noted.
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_CONVERSATION_ID = "gen_ai.conversation.id"
GEN_AI_AGENT_NAME = "gen_ai.agent.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"  # default only
GEN_AI_SYSTEM = "gen_ai.system"  # 1.36.0 only
GEN_AI_REQUEST_MODEL = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL = "gen_ai.response.model"
GEN_AI_RESPONSE_ID = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
GEN_AI_USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"  # default only
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS = "gen_ai.usage.reasoning.output_tokens"  # default only
GEN_AI_TOOL_NAME = "gen_ai.tool.name"
GEN_AI_TOOL_CALL_ID = "gen_ai.tool.call.id"
GEN_AI_INPUT_MESSAGES = "gen_ai.input.messages"  # default only, opt-in
GEN_AI_OUTPUT_MESSAGES = "gen_ai.output.messages"  # default only, opt-in
GEN_AI_TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"  # default only, opt-in
GEN_AI_TOOL_CALL_RESULT = "gen_ai.tool.call.result"  # default only, opt-in
GEN_AI_REQUEST_STREAM = "gen_ai.request.stream"  # default only
GEN_AI_REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
GEN_AI_REQUEST_TEMPERATURE = "gen_ai.request.temperature"
GEN_AI_REQUEST_TOP_P = "gen_ai.request.top_p"
GEN_AI_REQUEST_STOP_SEQUENCES = "gen_ai.request.stop_sequences"
GEN_AI_REQUEST_FREQUENCY_PENALTY = "gen_ai.request.frequency_penalty"
GEN_AI_REQUEST_PRESENCE_PENALTY = "gen_ai.request.presence_penalty"
GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK = "gen_ai.response.time_to_first_chunk"  # default only
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"  # default only
GEN_AI_SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"  # default only, opt-in
GEN_AI_TOOL_DEFINITIONS = "gen_ai.tool.definitions"  # default only, opt-in
GEN_AI_TOOL_TYPE = "gen_ai.tool.type"
GEN_AI_TOOL_DESCRIPTION = "gen_ai.tool.description"
SERVER_ADDRESS = "server.address"
SERVER_PORT = "server.port"
ERROR_TYPE = "error.type"
SESSION_ID = "session.id"

# Dex's own: where a span comes from, and the content it refers to without recording it.
DEX_FLOW_ID = "dex.flow.id"
DEX_RUN_ID = "dex.run.id"
DEX_STEP_TYPE = "dex.step.type"
DEX_STEP_EXECUTION_ID = "dex.step.execution_id"
DEX_STEP_ATTEMPT = "dex.step.attempt"
DEX_AGENT_TURN_ID = "dex.agent.turn.id"
DEX_AGENT_INPUT_FIRST_KEY = "dex.agent.input_messages.first_key"
DEX_AGENT_INPUT_LAST_KEY = "dex.agent.input_messages.last_key"
DEX_AGENT_INPUT_COUNT = "dex.agent.input_messages.count"
DEX_AGENT_OUTPUT_FIRST_KEY = "dex.agent.output_messages.first_key"
DEX_AGENT_OUTPUT_LAST_KEY = "dex.agent.output_messages.last_key"
DEX_AGENT_OUTPUT_COUNT = "dex.agent.output_messages.count"
DEX_AGENT_TOOL_CALL_IDS = "dex.agent.tool_call_ids"
DEX_TOOL_EFFECT = "dex.tool.effect"
DEX_TOOL_STATUS = "dex.tool.status"

# Where 1.36.0 spelled a provider differently from the default conventions.
_V1_36_0_PROVIDER_NAMES = {
    "azure.ai.inference": "az.ai.inference",
    "azure.ai.openai": "az.ai.openai",
    "x_ai": "xai",
}


def provider_attribute(conventions: GenAIConventions, provider_name: str) -> tuple[str, str]:
    """Return the attribute that names the provider, and its value, in ``conventions``."""
    if conventions is GenAIConventions.V1_36_0:
        return GEN_AI_SYSTEM, _V1_36_0_PROVIDER_NAMES.get(provider_name, provider_name)
    return GEN_AI_PROVIDER_NAME, provider_name
