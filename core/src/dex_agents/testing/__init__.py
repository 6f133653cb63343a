"""Integration-test kit for agent session Flows and their framework adapters.

``AgentTestStack`` starts a private ``dex-devserver`` (or targets ``DEX_SERVER_ADDRESS``), a Client, and
Worker children in their own process groups that a test can SIGKILL at an exact point (``FileGate``).
``InvocationLog`` counts real model and tool calls across processes, ``read_step_history`` reads the Step
shape of a session from the server, and ``wait_until`` / ``wait_for_agent_snapshot`` poll with deadlines.

Scripted models answer from a ``ScriptStore`` (``scripted_model_response``) and stream their text in
``text_chunks``; scripted tools (``MATRIX_TOOLS``, ``run_scripted_tool``, and ``run_inline_scripted_tool``
for tools a harness runs inline inside ``RunModel``) log and gate every real run; ``ScriptedRunner`` is a
framework-free runner built on them. The design's matrix is ``dex_agents.testing.matrix.AgentMatrixTests``
(run with a ``MatrixSpec``), and the runner contract in process, without a server, is
``dex_agents.testing.runner_contract.RunnerContractTests`` (run with a ``RunnerContractSpec``).

What the adapters share besides: ``SessionSide`` plays the session's side of the runner contract in
process for framework tests, ``read_agent_events`` / ``text_by_model_step`` / ``recorded_usage`` read a
session's events back, ``run_example`` / ``check_order_desk_output`` run an example as a user does and
check what the order-desk driver printed, ``readme_snippets`` reads the files a README spells out and
``run_readme_files`` runs its Worker and client files on a private devserver (so a test runs exactly what
users copy), ``run_mcp_inventory_scenario`` runs the MCP inventory session scenario against an adapter's
MCP agent, ``mcp_inventory_server_command`` starts the MCP server it expects
(``python -m dex_agents.testing.mcp_inventory_server``) on stdio, and ``start_mcp_inventory_http_server``
runs the same server on Streamable HTTP on loopback. ``official_mcp_server_command`` and
``start_official_mcp_http_server`` start the official MCP reference servers that the core's
``tests/mcp_servers`` pins (optionally behind a tap whose log ``read_mcp_wire_log`` reads).
``dex_agents.testing.stepwise`` has the scripted model of Stepwise agents (it needs the ``stepwise``
extra), and ``dex_agents.testing.otel_spans`` collects the spans a Worker writes.

``stored_calls_without_result`` checks that a stored transcript has no tool call without its result, as
a steered, cancelled or failed turn must leave it.

Scripted tools can also ask the user before they take effect (``ScriptedToolCall.asks``, a list of
``ScriptedQuestion``) and start a remote task that ``ScriptedRunner`` polls and cancels
(``ScriptedToolCall.task``, a ``ScriptedTask``); ``AgentTestStack.skip_durable_wait`` ends a waiting
``durable_wait`` with ``SkipTimer``.
"""

# First: registers the pytest modules with pytest's assertion rewriting before anything imports them.
from dex_agents.testing import _assert_rewrite  # noqa: F401  # pyright: ignore[reportUnusedImport]
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
from dex_agents.testing._mcp_http_server import McpInventoryHttpServer, start_mcp_inventory_http_server
from dex_agents.testing._mcp_inventory import McpInventoryRun, run_mcp_inventory_scenario
from dex_agents.testing._official_mcp import (
    OFFICIAL_MCP_SERVERS_ENV,
    McpWireMessage,
    OfficialMcpHttpServer,
    OfficialMcpServerName,
    official_mcp_server_command,
    official_mcp_server_version,
    official_mcp_servers_dir,
    read_mcp_wire_log,
    start_official_mcp_http_server,
)
from dex_agents.testing._projection import ProjectedCall, check_message_projection
from dex_agents.testing._provider_server import (
    ProviderRequest,
    ScriptedProviderServer,
    read_provider_requests,
    scripted_provider_server,
)
from dex_agents.testing._readme import ReadmeRun, readme_snippets, run_readme_files
from dex_agents.testing._runner_contract_spec import RunnerContractSpec
from dex_agents.testing._scoped_runner import ModelCallScopedRunner, with_model_call_scope
from dex_agents.testing._script import (
    DEFAULT_SCRIPTED_SUMMARY,
    STATE_DIR_ENV,
    ModelCallScope,
    ProviderFault,
    ProviderFaultKind,
    ScriptedResponse,
    ScriptedToolCall,
    ScriptStore,
    current_model_call,
    model_call_scope,
    run_inline_scripted_tool,
    run_scripted_tool,
    script_store_scope,
    scripted_model_response,
    scripted_summary_response,
)
from dex_agents.testing._scripted_runner import ScriptedRunner, render_message, scripted_token_count
from dex_agents.testing._scripted_tasks import TASK_HANDLE_SAVED_EVENT, ScriptedQuestion, ScriptedTask
from dex_agents.testing._server import DevServerProcess
from dex_agents.testing._session_events import read_agent_events, recorded_usage, text_by_model_step
from dex_agents.testing._session_side import SessionSide
from dex_agents.testing._stack import AgentTestStack
from dex_agents.testing._text_chunks import text_chunks
from dex_agents.testing._transcript import stored_calls_without_result
from dex_agents.testing._waiting import wait_for_agent_snapshot, wait_until
from dex_agents.testing._worker import WorkerProcess, run_agent_worker
from dex_agents.testing.mcp_inventory_server import (
    MCP_INVENTORY_SERVER_MODULE,
    MCP_TEST_LOG_ENV,
    McpStdioCommand,
    mcp_inventory_server_command,
)

__all__ = [
    "DEFAULT_SCRIPTED_SUMMARY",
    "EXECUTE_COMPLETED_EVENT",
    "EXECUTE_FAILED_EVENT",
    "MATRIX_TOOLS",
    "MCP_INVENTORY_SERVER_MODULE",
    "MCP_TEST_LOG_ENV",
    "OFFICIAL_MCP_SERVERS_ENV",
    "STATE_DIR_ENV",
    "TASK_HANDLE_SAVED_EVENT",
    "WAIT_FOR_COMPLETED_EVENT",
    "WAIT_FOR_FAILED_EVENT",
    "AgentTestStack",
    "DevServerProcess",
    "FileGate",
    "HistoryMovement",
    "Invocation",
    "InvocationLog",
    "MatrixFlows",
    "MatrixSpec",
    "MatrixToolNames",
    "McpInventoryHttpServer",
    "McpInventoryRun",
    "McpStdioCommand",
    "McpWireMessage",
    "ModelCallScope",
    "ModelCallScopedRunner",
    "OfficialMcpHttpServer",
    "OfficialMcpServerName",
    "ProjectedCall",
    "ProviderFault",
    "ProviderFaultKind",
    "ProviderRequest",
    "ReadmeRun",
    "RunnerContractSpec",
    "ScriptStore",
    "ScriptedProviderServer",
    "ScriptedQuestion",
    "ScriptedResponse",
    "ScriptedRunner",
    "ScriptedTask",
    "ScriptedToolCall",
    "SessionSide",
    "StepHistoryEntry",
    "WorkerProcess",
    "cancel_order",
    "check_message_projection",
    "check_order_desk_output",
    "current_model_call",
    "executed_step_types",
    "lookup_order",
    "matrix_session_options",
    "mcp_inventory_server_command",
    "model_call_scope",
    "official_mcp_server_command",
    "official_mcp_server_version",
    "official_mcp_servers_dir",
    "read_agent_events",
    "read_mcp_wire_log",
    "read_provider_requests",
    "read_step_history",
    "readme_snippets",
    "recorded_usage",
    "refund_order",
    "render_message",
    "run_agent_worker",
    "run_example",
    "run_inline_scripted_tool",
    "run_matrix_worker",
    "run_mcp_inventory_scenario",
    "run_readme_files",
    "run_scripted_tool",
    "script_store_scope",
    "scripted_model_response",
    "scripted_provider_server",
    "scripted_summary_response",
    "scripted_token_count",
    "send_receipt",
    "start_mcp_inventory_http_server",
    "start_official_mcp_http_server",
    "stored_calls_without_result",
    "text_by_model_step",
    "text_chunks",
    "wait_for_agent_snapshot",
    "wait_for_turn_end",
    "wait_until",
    "with_model_call_scope",
]
