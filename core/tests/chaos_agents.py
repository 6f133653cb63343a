"""A deliberately broken runner for the chaos suite's own test: the chaos checks must catch it.

`ExecutesTwiceRunner` runs every approved call twice, as a framework that retries a tool by itself would;
every single-attempt write then runs twice, which the chaos run must report with its seed.
"""

from dex_agents import DeferredToolExecution, DeferredToolOutcome
from dex_agents.testing import MatrixSpec, ScriptedRunner
from tests.agents import CORE_DIR


class ExecutesTwiceRunner(ScriptedRunner):
    """Runs each deferred call a second time and keeps the second result."""

    async def execute_deferred_tool_call(self, call: DeferredToolExecution) -> DeferredToolOutcome:
        await super().execute_deferred_tool_call(call)
        return await super().execute_deferred_tool_call(call)


EXECUTES_TWICE_SPEC = MatrixSpec(
    build_runner=ExecutesTwiceRunner,
    worker_module="tests.chaos_broken_worker",
    flow_type_prefix="ExecutesTwice",
    worker_cwd=CORE_DIR,
)
