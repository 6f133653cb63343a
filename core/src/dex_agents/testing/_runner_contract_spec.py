"""What an adapter supplies to run the runner contract tests (no pytest needed)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from dex_agents import AgentFrameworkRunner
from dex_agents.testing._matrix_tools import MatrixToolNames

__all__ = ["RunnerContractSpec"]


@dataclass(frozen=True)
class RunnerContractSpec:
    """What an adapter supplies to run `RunnerContractTests`.

    Attributes:
        build_runner: Builds the adapter's runner around its scripted model (which answers with
            ``scripted_model_response``) and the matrix tools, as `MatrixSpec.build_runner` does; the
            same function serves both.
        foreign_run_state_error: A fragment of the error the runner gives for a run state another runner
            wrote, such as ``"not written by PydanticAiRunner"`` (what `RunStateFormat.unwrap` says).
        tool_names: The names the agent gives the four matrix tools.
        unknown_tool_message: A fragment of what the framework tells the model about a call to a tool name
            the agent does not have (the tests call ``launch_rocket``); ``None`` skips that test.
        runs_reads_inline: ``True`` for a harness that runs reads inline inside its model Step (the Claude
            Agent SDK adapter's CLI run) and defers only writes. The tests then take the inline path where
            it differs: a read turn completes in one ``run_model_step``, a read's result is its scripted
            ``output``, and a test that needs a deferred call uses a write. The two tests that assume every
            call of a response is deferred still assume it; such an adapter marks them ``xfail``.
    """

    build_runner: Callable[[], AgentFrameworkRunner]
    foreign_run_state_error: str
    tool_names: MatrixToolNames = field(default_factory=MatrixToolNames)
    unknown_tool_message: str | None = None
    runs_reads_inline: bool = False
