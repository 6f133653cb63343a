"""The agents of the bad-input table, as the test process and the Worker child build them.

`ModelMistakesRunner` is the core's `ScriptedRunner` whose model can also write arguments that are not a
JSON object: a scripted call whose arguments hold `RAW_ARGUMENTS` sends that text as the call's arguments.
A scripted `turn_error` that starts with `DROPS_ITS_MESSAGES` comes back without the turn's new messages, as
a framework that stops a run by raising (a recursion limit, a refused confirmation) returns it.
`NotASessionFlow` is a Flow of another kind, which a session client must not be pointed at.
`BAD_PROVIDER_SPEC`'s agent is Stepwise on LiteLLM's OpenAI provider, talking HTTP to the scripted provider
server, for the rows whose bad input is a provider's answer.
"""

import json
from dataclasses import replace

from dex import Context, Flow, PersistenceSchema, Step, StepDecision, StepList, dead_end

from dex_agents import AgentTurnContext, AgentTurnOutcome, ToolCallsRequested, TurnCompleted
from dex_agents.testing import MatrixSpec, ScriptedRunner
from tests.agents import CORE_DIR
from tests.stepwise_provider_agents import build_openai_runner

RAW_ARGUMENTS = "raw_arguments"
"""The argument whose value a `ModelMistakesRunner` call sends as its whole argument text."""
DROPS_ITS_MESSAGES = "the run stopped"
"""The start of a scripted turn_error that a `ModelMistakesRunner` returns with no new messages."""


class ModelMistakesRunner(ScriptedRunner):
    """A scripted runner whose model may write malformed tool arguments.

    Its tool names are known only once it made a model call, as a runner's whose tools come from an MCP
    listing, so its sessions check their tool policies at run time (``MatrixFlows.misspelled_policy``).
    """

    def __init__(self) -> None:
        super().__init__(lists_tool_names_after_model_call=True)

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        outcome = await super().run_model_step(turn)
        if isinstance(outcome, TurnCompleted) and (outcome.turn_error or "").startswith(DROPS_ITS_MESSAGES):
            return replace(outcome, new_messages=())
        if not isinstance(outcome, ToolCallsRequested):
            return outcome
        calls = [
            replace(call, arguments=arguments[RAW_ARGUMENTS])
            if RAW_ARGUMENTS in (arguments := json.loads(call.arguments))
            else call
            for call in outcome.tool_calls
        ]
        return replace(outcome, tool_calls=calls)


class _Idle(Step[str]):
    def execute(self, context: Context, input: str) -> StepDecision:
        return dead_end()


class NotASessionFlow(Flow[str]):
    """A Flow that is not an agent session: it has none of the session's RPCs."""

    def get_flow_type(self) -> str:
        return "BadInputNotASession"

    def get_steps(self) -> StepList[str]:
        return StepList[str].start_step(_Idle())

    def get_persistence_schema(self) -> PersistenceSchema:
        return PersistenceSchema.of()


BAD_INPUT_SPEC = MatrixSpec(
    build_runner=ModelMistakesRunner,
    worker_module="tests.bad_input_worker",
    flow_type_prefix="BadInput",
    worker_cwd=CORE_DIR,
)


BAD_PROVIDER_SPEC = MatrixSpec(
    build_runner=build_openai_runner,
    worker_module="tests.bad_input_worker",
    flow_type_prefix="BadInputProvider",
    worker_cwd=CORE_DIR,
    provider_backed=True,
)
