"""Integration-test kit for agent session Flows and their framework adapters.

``AgentTestStack`` starts a private ``dex-devserver`` (or targets ``DEX_SERVER_ADDRESS``), a Client, and
Worker children in their own process groups that a test can SIGKILL at an exact point (``FileGate``).
``InvocationLog`` counts real model and tool calls across processes, ``read_step_history`` reads the Step
shape of a session from the server, and ``wait_until`` / ``wait_for_agent_snapshot`` poll with deadlines.

Scripted models answer from a ``ScriptStore`` (``scripted_model_response``), scripted tools
(``MATRIX_TOOLS``, ``run_scripted_tool``, and ``run_inline_scripted_tool`` for tools a harness runs inline
inside ``RunModel``) log and gate every real run, and ``ScriptedRunner`` is a framework-free runner built
on them. The design's 11-item matrix is ``dex_agents.testing.matrix
.AgentMatrixTests``, which an adapter runs with a ``MatrixSpec``.

What the adapters share besides: ``SessionSide`` plays the session's side of the runner contract in
process for framework tests, ``read_agent_events`` / ``text_by_model_step`` / ``recorded_usage`` read a
session's events back, ``run_approval_demo`` (with ``order_desk_main`` and ``RefundExampleHooks``)
drives the examples' approval-across-a-Worker-kill demo, ``run_example`` / ``check_order_desk_output``
run an example as a user does and check what the order-desk driver printed, ``run_mcp_inventory_scenario``
runs the MCP inventory session scenario against an adapter's MCP agent, and ``run_turn_overhead_bench``
times a turn in process and as a durable session.

``stored_calls_without_result`` checks that a stored transcript has no tool call without its result, as
a steered, cancelled or failed turn must leave it.
"""

# First: registers the matrix with pytest's assertion rewriting before anything imports it.
from dex_agents.testing import _assert_rewrite  # noqa: F401  # pyright: ignore[reportUnusedImport]
from dex_agents.testing._demo import ApprovalDecision, ApprovalDemo, DemoHooks, run_approval_demo
from dex_agents.testing._example_runs import check_order_desk_output, run_example
from dex_agents.testing._gates import FileGate
from dex_agents.testing._history import (
    EXECUTE_COMPLETED_EVENT,
    EXECUTE_FAILED_EVENT,
    WAIT_FOR_COMPLETED_EVENT,
    WAIT_FOR_FAILED_EVENT,
    HistoryMovement,
    StepHistoryEntry,
    executed_step_types,
    read_step_history,
)
from dex_agents.testing._invocations import Invocation, InvocationLog
from dex_agents.testing._matrix_spec import MatrixFlows, MatrixSpec, run_matrix_worker, wait_for_turn_end
from dex_agents.testing._matrix_tools import (
    MATRIX_TOOLS,
    MatrixToolNames,
    cancel_order,
    lookup_order,
    matrix_session_options,
    refund_order,
    send_receipt,
)
from dex_agents.testing._mcp_inventory import McpInventoryRun, run_mcp_inventory_scenario
from dex_agents.testing._order_desk_demo import OrderDeskDemo, order_desk_main
from dex_agents.testing._refund_example import RefundExampleHooks
from dex_agents.testing._scoped_runner import ModelCallScopedRunner, with_model_call_scope
from dex_agents.testing._script import (
    STATE_DIR_ENV,
    ModelCallScope,
    ScriptedResponse,
    ScriptedToolCall,
    ScriptStore,
    current_model_call,
    model_call_scope,
    run_inline_scripted_tool,
    run_scripted_tool,
    script_store_scope,
    scripted_model_response,
)
from dex_agents.testing._scripted_runner import ScriptedRunner, render_message
from dex_agents.testing._server import DevServerProcess
from dex_agents.testing._session_events import read_agent_events, recorded_usage, text_by_model_step
from dex_agents.testing._session_side import SessionSide
from dex_agents.testing._stack import AgentTestStack
from dex_agents.testing._transcript import stored_calls_without_result
from dex_agents.testing._turn_overhead import DurableTurn, InProcessTurn, run_turn_overhead_bench
from dex_agents.testing._waiting import wait_for_agent_snapshot, wait_until
from dex_agents.testing._worker import WorkerProcess, run_agent_worker

__all__ = [
    "EXECUTE_COMPLETED_EVENT",
    "EXECUTE_FAILED_EVENT",
    "MATRIX_TOOLS",
    "STATE_DIR_ENV",
    "WAIT_FOR_COMPLETED_EVENT",
    "WAIT_FOR_FAILED_EVENT",
    "AgentTestStack",
    "ApprovalDecision",
    "ApprovalDemo",
    "DemoHooks",
    "DevServerProcess",
    "DurableTurn",
    "FileGate",
    "HistoryMovement",
    "InProcessTurn",
    "Invocation",
    "InvocationLog",
    "MatrixFlows",
    "MatrixSpec",
    "MatrixToolNames",
    "McpInventoryRun",
    "ModelCallScope",
    "ModelCallScopedRunner",
    "OrderDeskDemo",
    "RefundExampleHooks",
    "ScriptStore",
    "ScriptedResponse",
    "ScriptedRunner",
    "ScriptedToolCall",
    "SessionSide",
    "StepHistoryEntry",
    "WorkerProcess",
    "cancel_order",
    "check_order_desk_output",
    "current_model_call",
    "executed_step_types",
    "lookup_order",
    "matrix_session_options",
    "model_call_scope",
    "order_desk_main",
    "read_agent_events",
    "read_step_history",
    "recorded_usage",
    "refund_order",
    "render_message",
    "run_agent_worker",
    "run_approval_demo",
    "run_example",
    "run_inline_scripted_tool",
    "run_matrix_worker",
    "run_mcp_inventory_scenario",
    "run_scripted_tool",
    "run_turn_overhead_bench",
    "script_store_scope",
    "scripted_model_response",
    "send_receipt",
    "stored_calls_without_result",
    "text_by_model_step",
    "wait_for_agent_snapshot",
    "wait_for_turn_end",
    "wait_until",
    "with_model_call_scope",
]
