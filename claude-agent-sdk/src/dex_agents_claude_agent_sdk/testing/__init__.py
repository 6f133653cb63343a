"""A scripted Anthropic Messages API for running the Claude harness offline, with the real Claude Code CLI.

The Claude harness's model slot is the Messages API that the CLI calls at `ANTHROPIC_BASE_URL`.
`ScriptedClaudeApi` serves scripted answers there, on a loopback port of the Worker process, in the API's
streaming format (server-sent events), so the real bundled CLI runs your agent, its hook, its tools and
its session transcript with no key and no network. It has two modes:

- standalone: `ScriptedClaudeApi([ApiReply(...), ...])` answers each model call with the next reply of a
  list (text and tool uses), or `ScriptedClaudeApi(responder)` with what an async function of the request
  returns;
- script store: `ScriptedClaudeApi.from_script_store()` answers from `dex_agents.testing`'s `ScriptStore`,
  as every adapter's scripted model does, for the shared matrix and your own session tests (the runner
  must be wrapped with `dex_agents.testing.with_model_call_scope`).

`api.options(base)` is the runner's options factory: it returns ``base`` pointed at the API::

    lookup = ApiToolUse("lookup-1", "lookup_order", {"order_id": "A-17"})
    api = ScriptedClaudeApi([
        ApiReply(text="Let me look.", tool_uses=[lookup]),
        ApiReply(text="Order A-17 shipped on Monday."),
    ])
    runner = ClaudeAgentRunner(api.options(ClaudeAgentOptions(system_prompt="...")), [lookup_order])

A model call whose request the CLI abandons (its connection closes, as when `cancel_turn` kills the CLI)
has its answer cancelled, so a scripted model call that waits (a gate, ``block_until_cancelled``) logs its
cancellation. `AnthropicApiServer` is the server underneath, for a test that needs it alone.
"""

from dex_agents_claude_agent_sdk.testing._api_server import (
    AnthropicApiServer,
    ApiReply,
    ApiRequest,
    ApiToolUse,
    Responder,
)
from dex_agents_claude_agent_sdk.testing._scripted_api import OFFLINE_ENV, ScriptedClaudeApi

__all__ = [
    "OFFLINE_ENV",
    "AnthropicApiServer",
    "ApiReply",
    "ApiRequest",
    "ApiToolUse",
    "Responder",
    "ScriptedClaudeApi",
]
