"""The stand-in runner of a session Flow built for a client process, which never runs a Step."""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

from dex_agents.runner import AgentTurnContext, AgentTurnOutcome, DeferredToolExecution, ToolExecutionResult
from dex_agents.values import FrameworkMessage

if TYPE_CHECKING:
    from dex_agents.compaction import ContextSummaryRequest, ContextSummaryResult

__all__ = ["ClientOnlyFlowError", "ClientOnlyRunner"]


class ClientOnlyFlowError(RuntimeError):
    """A Step reached the runner of a Flow built with `AgentSessionFlow.for_client`."""


class ClientOnlyRunner:
    """Stands where a client process's Flow has no runner; every call fails with a clear error.

    A Flow built for a client registers the same Steps, RPCs, persistence and event Stream as the Worker's,
    so the SDK's Registry accepts it, but a Worker must never serve it: `AgentWorker` refuses it, and an
    `AsyncWorker` built by hand fails each Step that needs the runner with `ClientOnlyFlowError`. It has the
    `ContextCompactionRunner` methods and claims plan mode too, so a client may pass the Worker's options,
    compaction and plan mode included: the Worker's own Flow decides what its runner can do.
    """

    def __init__(self, flow_type: str) -> None:
        """Create the stand-in for ``flow_type``."""
        self._flow_type = flow_type

    @property
    def supports_plan_mode(self) -> bool:
        """True, so the Worker's options with plan mode build this Flow; the Worker's runner decides."""
        return True

    def _refuse(self) -> NoReturn:
        raise ClientOnlyFlowError(
            f"the session Flow {self._flow_type!r} was built with AgentSessionFlow.for_client for a client "
            "process and has no runner; serve the Flow built with its runner (AgentWorker refuses this one)"
        )

    def build_user_message(self, text: str) -> FrameworkMessage:
        """Refuse: a client process runs no Step."""
        del text
        self._refuse()

    async def run_model_step(self, turn: AgentTurnContext) -> AgentTurnOutcome:
        """Refuse: a client process runs no Step."""
        del turn
        self._refuse()

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> ToolExecutionResult:
        """Refuse: a client process runs no Step."""
        del call
        self._refuse()

    def estimate_input_tokens(self, turn: AgentTurnContext) -> int:
        """Refuse: a client process runs no Step."""
        del turn
        self._refuse()

    def select_compaction_cutoff(self, turn: AgentTurnContext, retained_token_budget: int) -> int | None:
        """Refuse: a client process runs no Step."""
        del turn, retained_token_budget
        self._refuse()

    async def summarize_context(self, request: ContextSummaryRequest) -> ContextSummaryResult:
        """Refuse: a client process runs no Step."""
        del request
        self._refuse()
