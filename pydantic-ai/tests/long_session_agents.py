"""The Flows of the long-session tests, built alike by the test and its Worker (`tests.long_session_worker`).

- ``PydanticAiCompacting``: an ordinary agent with the matrix tools and `ScriptedModel.from_script_store()`,
  in a session with a 1,000-token window (the runner's default estimate, a token per four characters), tiny
  message storage so the summarized messages sit in chunks, and retention that keeps four messages.
- ``PydanticAiSettings``: an agent whose model and added instructions come from the session settings; each of
  its two models says in its answer which model it is and which instructions it was given.
- ``PydanticAiCompactingOnRefusal``: the compacting agent with `OpenAIChatModel` behind the kit's scripted
  provider server and a window so large that only the provider's context-length refusal makes it compact.
- ``PydanticAiPlanning``: the compacting agent and window with plan mode (and so ``write_todos``) enabled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from dex_agents import AgentSessionFlow, CompactionPolicy
from dex_agents.testing import MATRIX_TOOLS, matrix_session_options, with_model_call_scope
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest

from dex_agents_pydantic_ai import PydanticAiRunner
from dex_agents_pydantic_ai.testing import ScriptedModel
from tests.provider_matrix_spec import chat_model

#: The compacting session's context window, in the runner's estimated tokens.
CONTEXT_WINDOW_TOKENS = 1000
#: Retention keeps at least this many messages when it deletes chunks behind the summary.
RETAINED_MESSAGES = 4
#: The refusal-compacting session's window: its own trigger never fires in the test.
REFUSAL_WINDOW_TOKENS = 100_000
#: Four messages in the window and two per chunk, so a few turns roll messages into chunks.
TINY_STORAGE = {"message_window_size": 4, "message_chunk_size": 2, "message_chunk_max_bytes": 64 * 1024}


def _answer_as(name: str) -> Callable[[list[ModelMessage]], str]:
    def answer(messages: list[ModelMessage]) -> str:
        last = messages[-1]
        instructions = last.instructions if isinstance(last, ModelRequest) else None
        return f"{name} model; instructions: {instructions}"

    return answer


SETTINGS_MODELS = {
    "small": ScriptedModel(_answer_as("small"), model_name="small"),
    "large": ScriptedModel(_answer_as("large"), model_name="large"),
}


def _model_for(settings: Mapping[str, object]) -> ScriptedModel | None:
    name = settings.get("model")
    return None if name is None else SETTINGS_MODELS[str(name)]


def _instructions_for(settings: Mapping[str, object]) -> str | None:
    tone = settings.get("tone")
    return None if tone is None else f"Answer in a {tone} tone."


def build_flows() -> tuple[AgentSessionFlow, AgentSessionFlow, AgentSessionFlow, AgentSessionFlow]:
    compacting = Agent(ScriptedModel.from_script_store(), tools=list(MATRIX_TOOLS))
    options = replace(
        matrix_session_options(),
        **TINY_STORAGE,
        retained_message_limit=RETAINED_MESSAGES,
        compaction=CompactionPolicy(context_window_tokens=CONTEXT_WINDOW_TOKENS),
    )
    settings = Agent(SETTINGS_MODELS["small"], instructions="You are the order desk.")
    on_refusal = Agent(chat_model(), tools=list(MATRIX_TOOLS))
    refusal_options = replace(
        matrix_session_options(), compaction=CompactionPolicy(context_window_tokens=REFUSAL_WINDOW_TOKENS)
    )
    planning_options = replace(
        matrix_session_options(built_in_tools=("write_todos",)),
        plan_mode_enabled=True,
        compaction=CompactionPolicy(context_window_tokens=CONTEXT_WINDOW_TOKENS),
    )
    return (
        AgentSessionFlow(
            with_model_call_scope(PydanticAiRunner(compacting)),
            flow_type="PydanticAiCompacting",
            options=options,
        ),
        AgentSessionFlow(
            PydanticAiRunner(
                settings, model_for_settings=_model_for, instructions_for_settings=_instructions_for
            ),
            flow_type="PydanticAiSettings",
        ),
        AgentSessionFlow(
            with_model_call_scope(PydanticAiRunner(on_refusal)),
            flow_type="PydanticAiCompactingOnRefusal",
            options=refusal_options,
        ),
        AgentSessionFlow(
            with_model_call_scope(PydanticAiRunner(compacting)),
            flow_type="PydanticAiPlanning",
            options=planning_options,
        ),
    )
