"""Agents for the tests of the harness specifics; the test process and its Worker build them here."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any, cast

from claude_agent_sdk import (
    CanUseTool,
    PermissionResult,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
)
from dex_agents import WRITE_TODOS, AgentSessionFlow, AgentSessionOptions
from dex_agents.compaction import CompactionPolicy
from dex_agents.testing import (
    STATE_DIR_ENV,
    matrix_session_options,
    with_model_call_scope,
)

from dex_agents_claude_agent_sdk import ClaudeAgentRunner
from tests.scripted_claude import matrix_tools, scripted_options, scripted_options_with

BASH_REFUSAL = "Bash is off limits in this deployment."
REMOVAL_REFUSAL = "Nothing is removed in this deployment."


def permission_log_path(state_dir: Path) -> Path:
    """Where the guarded agent's `can_use_tool` logs every call it is asked about."""
    return state_dir / "can-use-tool.log"


async def refuse_bash(
    name: str, tool_input: dict[str, Any], context: ToolPermissionContext
) -> PermissionResult:
    """The user's own permission callback: logs every call it sees and refuses `Bash`."""
    state_dir = Path(os.environ[STATE_DIR_ENV])
    with permission_log_path(state_dir).open("a", encoding="utf-8") as log:
        log.write(json.dumps({"tool": name, "input": tool_input, "tool_use_id": context.tool_use_id}) + "\n")
    if name == "Bash":
        return PermissionResultDeny(message=BASH_REFUSAL)
    return PermissionResultAllow()


async def refuse_removals(
    name: str, tool_input: dict[str, Any], context: ToolPermissionContext
) -> PermissionResult | None:
    """A `can_use_tool` that refuses `rm` and leaves every other request to the session's approval."""
    del context
    if name == "Bash" and str(tool_input.get("command", "")).startswith("rm "):
        return PermissionResultDeny(message=REMOVAL_REFUSAL)
    return None


def build_flows() -> tuple[AgentSessionFlow, ...]:
    """The matrix agent, a Bash agent, one that defers reads too, an agent whose `can_use_tool` refuses
    Bash next to the matrix tools, a Bash agent whose permission requests the session approves, and the
    matrix agent with Bash and plan mode, and an agent whose session compacts early."""
    return (
        AgentSessionFlow(
            with_model_call_scope(ClaudeAgentRunner(scripted_options, matrix_tools())),
            flow_type="ClaudeSpecifics",
            options=matrix_session_options(),
        ),
        AgentSessionFlow(
            # The user allows Bash: the runner leaves built-ins to Claude Code's permission system.
            with_model_call_scope(
                ClaudeAgentRunner(scripted_options_with(tools=["Bash"], allowed_tools=["Bash"]))
            ),
            flow_type="ClaudeBuiltins",
        ),
        AgentSessionFlow(
            with_model_call_scope(
                ClaudeAgentRunner(scripted_options, matrix_tools(), inline_read_tools=False)
            ),
            flow_type="ClaudeDeferredReads",
            options=matrix_session_options(),
        ),
        AgentSessionFlow(
            with_model_call_scope(
                ClaudeAgentRunner(
                    scripted_options_with(tools=["Bash"], can_use_tool=refuse_bash), matrix_tools()
                )
            ),
            flow_type="ClaudeGuardedBuiltins",
            options=matrix_session_options(),
        ),
        AgentSessionFlow(
            with_model_call_scope(
                ClaudeAgentRunner(
                    # The SDK types can_use_tool without `None`, which leaves a request to the session.
                    scripted_options_with(tools=["Bash"], can_use_tool=cast(CanUseTool, refuse_removals)),
                    permission_requests_as_approvals=True,
                )
            ),
            flow_type="ClaudeSessionPermissions",
        ),
        AgentSessionFlow(
            with_model_call_scope(
                ClaudeAgentRunner(
                    scripted_options_with(tools=["Bash"], allowed_tools=["Bash"]), matrix_tools()
                )
            ),
            flow_type="ClaudePlanning",
            options=dataclasses.replace(
                matrix_session_options(built_in_tools=(WRITE_TODOS,)), plan_mode_enabled=True
            ),
        ),
        AgentSessionFlow(
            with_model_call_scope(ClaudeAgentRunner(scripted_options)),
            flow_type="ClaudeCompacting",
            # A window of 300 tokens as the runner counts them: compacts from 240, keeps about 90.
            options=AgentSessionOptions(
                compaction=CompactionPolicy(context_window_tokens=300, trigger_ratio=0.8, retained_ratio=0.3)
            ),
        ),
    )
