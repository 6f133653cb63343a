"""Pin the public surface of the test kit, the demos and the bench helpers, so a change fails CI."""

import subprocess
import sys

import dex_agents_bench
import dex_agents_examples

import dex_agents.testing
import dex_agents.testing.chaos
import dex_agents.testing.matrix
import dex_agents.testing.mcp_inventory_server
import dex_agents.testing.runner_contract

TESTING_EXPORTS = {
    "OFFICIAL_MCP_SERVERS_ENV",
    "McpWireMessage",
    "OfficialMcpHttpServer",
    "OfficialMcpServerName",
    "official_mcp_server_command",
    "official_mcp_server_version",
    "official_mcp_servers_dir",
    "read_mcp_wire_log",
    "start_official_mcp_http_server",
    "DEFAULT_SCRIPTED_SUMMARY",
    "EXECUTE_COMPLETED_EVENT",
    "EXECUTE_FAILED_EVENT",
    "MATRIX_TOOLS",
    "MCP_INVENTORY_SERVER_MODULE",
    "MCP_TEST_LOG_ENV",
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
    "ModelCallScope",
    "ModelCallScopedRunner",
    "ProjectedCall",
    "ReadmeRun",
    "RunnerContractSpec",
    "ScriptStore",
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
    "read_agent_events",
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
    "scripted_summary_response",
    "scripted_token_count",
    "send_receipt",
    "start_mcp_inventory_http_server",
    "stored_calls_without_result",
    "text_by_model_step",
    "text_chunks",
    "wait_for_agent_snapshot",
    "wait_for_turn_end",
    "wait_until",
    "with_model_call_scope",
    # provider faults (issue 31): the scripted provider server
    "ProviderFault",
    "ProviderFaultKind",
    "ProviderRequest",
    "ScriptedProviderServer",
    "read_provider_requests",
    "scripted_provider_server",
}


def test_testing_exports_are_pinned() -> None:
    assert set(dex_agents.testing.__all__) == TESTING_EXPORTS
    assert len(dex_agents.testing.__all__) == len(TESTING_EXPORTS)
    for name in TESTING_EXPORTS:
        assert getattr(dex_agents.testing, name) is not None


def test_matrix_exports_are_pinned() -> None:
    assert dex_agents.testing.matrix.__all__ == [
        "AgentMatrixTests",
        "MatrixFlows",
        "MatrixHarness",
        "MatrixSpec",
        "wait_for_turn_end",
    ]


def test_runner_contract_exports_are_pinned() -> None:
    assert dex_agents.testing.runner_contract.__all__ == [
        "RunnerContract",
        "RunnerContractSpec",
        "RunnerContractTests",
    ]
    assert dex_agents.testing.runner_contract.RunnerContractSpec is dex_agents.testing.RunnerContractSpec


def test_mcp_inventory_server_exports_are_pinned() -> None:
    assert dex_agents.testing.mcp_inventory_server.__all__ == [
        "BAD_ANSWERS",
        "IDEMPOTENCY_KEY_META_KEY",
        "MCP_INVENTORY_SERVER_MODULE",
        "MCP_TEST_FAIL_LISTING_ENV",
        "MCP_TEST_LOG_ENV",
        "MCP_TEST_TOOL_PREFIX_ENV",
        "McpStdioCommand",
        "main",
        "mcp_inventory_server_command",
    ]


def test_demos_exports_are_pinned() -> None:
    assert dex_agents_examples.__all__ == [
        "ORDER_DESK_INSTRUCTIONS",
        "ORDER_DESK_LEDGER_ENV",
        "ORDER_DESK_REQUEST",
        "ORDER_DESK_TOOL_POLICIES",
        "ApprovalDecision",
        "ApprovalDemo",
        "DemoHooks",
        "OrderDeskDemo",
        "RefundExampleHooks",
        "lookup_order",
        "order_desk_main",
        "refund_order",
        "run_approval_demo",
    ]
    for name in dex_agents_examples.__all__:
        assert getattr(dex_agents_examples, name) is not None


def test_bench_exports_are_pinned() -> None:
    assert dex_agents_bench.__all__ == [
        "DurableTurn",
        "InProcessTurn",
        "TurnSeries",
        "describe_cpu",
        "describe_series",
        "process_cpu_seconds",
        "run_durable_turns",
        "run_turn_overhead_bench",
        "wait_for_turn_completed",
    ]
    for name in dex_agents_bench.__all__:
        assert getattr(dex_agents_bench, name) is not None


def test_the_kit_holds_no_demo_or_benchmark() -> None:
    moved = {"ApprovalDemo", "OrderDeskDemo", "RefundExampleHooks", "run_approval_demo", "DurableTurn"}
    assert moved.isdisjoint(dex_agents.testing.__all__)
    code = (
        "import sys, dex_agents.testing; "
        "print(sorted(m for m in sys.modules if m.startswith(('dex_agents_examples', 'dex_agents_bench'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "[]"


def test_the_kit_imports_without_pytest_in_worker_children() -> None:
    # Worker children import dex_agents.testing; only the matrix and contract modules need pytest.
    code = "import sys; sys.modules['pytest'] = None; import dex_agents.testing; print('ok')"
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "ok", result.stderr


def test_otel_spans_exports_are_pinned_and_the_kit_does_not_import_it() -> None:
    import dex_agents.testing.otel_spans

    assert dex_agents.testing.otel_spans.__all__ == [
        "SPAN_FILE_ENV",
        "ExportedSpan",
        "JsonLinesSpanExporter",
        "export_spans_to_file",
        "read_exported_spans",
    ]
    assert "otel_spans" not in dex_agents.testing.__all__


def test_genai_conventions_exports_are_pinned_and_its_vendored_yaml_ships_with_it() -> None:
    import dex_agents.testing.genai_conventions as genai_conventions

    assert genai_conventions.__all__ == [
        "CONVENTIONS_COMMIT",
        "NOT_APPLICABLE",
        "Conventions",
        "SpanRequirement",
        "attribute_table",
        "conventions_problems",
        "load_conventions",
        "span_type_of",
    ]
    assert "genai_conventions" not in dex_agents.testing.__all__
    conventions = genai_conventions.load_conventions()
    assert "gen_ai.request.stream" in conventions.registry
    assert conventions.span_types["gen_ai.inference.client"]["gen_ai.operation.name"].level == "required"


def test_chaos_exports_are_pinned() -> None:
    assert dex_agents.testing.chaos.__all__ == [
        "CHECK_TURN_ANSWER",
        "CHECK_TURN_MESSAGE",
        "REPORT_FORMAT",
        "ChaosReport",
        "ChaosSettings",
        "ChaosSpec",
        "PlannedTurn",
        "SessionPlan",
        "Violation",
        "idempotency_key_violations",
        "load_chaos_spec",
        "plan_session",
        "run_chaos",
        "single_attempt_violations",
        "transcript_violations",
        "user_message_violations",
    ]


def test_the_chaos_driver_imports_neither_pytest_nor_a_framework() -> None:
    # It runs in every package's environment with that package's spec; it brings no framework of its own.
    code = (
        "import sys; sys.modules['pytest'] = None; import dex_agents.testing.chaos.__main__; "
        "print(sorted(m for m in sys.modules if m.startswith("
        "('litellm', 'pydantic_ai', 'agents', 'langgraph', 'langchain', 'google.adk', 'claude_agent_sdk'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "[]", result.stderr


def test_the_library_imports_neither_the_kit_nor_pytest() -> None:
    # Every module of the wheel but the kit, imported where the kit and pytest cannot be: an application
    # installs dex-agents without the testing extra.
    code = """
import importlib, pkgutil, sys
sys.modules["dex_agents.testing"] = None
sys.modules["pytest"] = None
import dex_agents
names = [
    module.name
    for module in pkgutil.walk_packages(dex_agents.__path__, "dex_agents.")
    if not module.name.startswith("dex_agents.testing")
]
for name in names:
    importlib.import_module(name)
print(len(names))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) > 60, result.stdout


def test_the_matrix_worker_reads_the_span_file_variable_the_span_kit_names() -> None:
    from dex_agents.testing import _matrix_spec
    from dex_agents.testing.otel_spans import SPAN_FILE_ENV

    assert _matrix_spec._SPAN_FILE_ENV == SPAN_FILE_ENV  # pyright: ignore[reportPrivateUsage]
