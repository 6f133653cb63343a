"""The Claude harness agent against provider faults: the matrix agent with the CLI's own retries on.

The CLI is the provider client: it speaks HTTP to the package's scripted Messages API
(`ScriptedClaudeApi.from_script_store`), which answers from the session's script and fails the requests a
scripted response's `ProviderFault`s name, as the core kit's scripted provider server does. Unlike the
matrix's `OFFLINE_ENV` (no CLI retries, so a scripted error is one attempt's failure), the CLI retries a
failed request once by itself here, as it does (ten times) by default, so a 429 is waited out by the CLI.
A session started with the setting `api_timeout_ms` gives the CLI that request timeout (`API_TIMEOUT_MS`),
for a first byte slower than the timeout; others keep the CLI's ten minutes, so gates may hold a response.
The Worker child is `tests.provider_matrix_worker`; `scripts/chaos` imports this `SPEC` too.
"""

from __future__ import annotations

import dataclasses

from claude_agent_sdk import ClaudeAgentOptions
from dex_agents import AgentTurnContext

from dex_agents_claude_agent_sdk import ClaudeAgentRunner
from tests.matrix_spec import SPEC as MATRIX_SPEC
from tests.scripted_claude import matrix_tools, scripted_options_with

CLI_RETRIES = 1
"""`CLAUDE_CODE_MAX_RETRIES` of these runs: the CLI sends a failed request once more before it gives up."""

API_TIMEOUT_SETTING = "api_timeout_ms"
"""The session setting that sets the CLI's request timeout (`API_TIMEOUT_MS`) of the session's runs."""

_scripted_options = scripted_options_with(env={"CLAUDE_CODE_MAX_RETRIES": str(CLI_RETRIES)})


async def provider_options(turn: AgentTurnContext) -> ClaudeAgentOptions:
    """The scripted options with the CLI's retries on, and the session's request timeout if it sets one."""
    options = await _scripted_options(turn)
    timeout = turn.session_settings.get(API_TIMEOUT_SETTING)
    if timeout is None:
        return options
    return dataclasses.replace(options, env={**options.env, "API_TIMEOUT_MS": str(timeout)})


def build_provider_runner() -> ClaudeAgentRunner:
    """The matrix agent, with the CLI's own retries on."""
    return ClaudeAgentRunner(provider_options, matrix_tools())


SPEC = dataclasses.replace(
    MATRIX_SPEC,
    build_runner=build_provider_runner,
    worker_module="tests.provider_matrix_worker",
    flow_type_prefix="ClaudeAgentSdkProvider",
    provider_backed=True,
)
"""The provider-fault matrix agent and its Worker."""
