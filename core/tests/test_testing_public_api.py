"""Pin the public surface of the test kit, so an accidental export or removal fails CI."""

import dex_agents.testing
import dex_agents.testing.matrix

TESTING_EXPORTS = {
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


def test_the_kit_imports_without_pytest_in_worker_children() -> None:
    # Worker children import dex_agents.testing; only the matrix module needs pytest.
    import subprocess
    import sys

    code = "import sys; sys.modules['pytest'] = None; import dex_agents.testing; print('ok')"
    result = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "ok", result.stderr
