#!/usr/bin/env bash
# This package's whole check from a fresh clone: locked install, lint, format, strict types, and the tests
# twice at once: on the lockfile (the newest versions) and on the lowest versions the ranges allow
# (lowest-versions.txt, see ../scripts/lib/lowest.sh).
set -euo pipefail
cd "$(dirname "$0")"
source ../scripts/lib/ensure-uv.sh
source ../scripts/lib/lowest.sh
source ../scripts/lib/official-mcp-servers.sh
export UV_PYTHON="${UV_PYTHON:-3.11}"
# Compiled once here, so the many Worker processes the tests start read bytecode instead of compiling their
# imports each time (PYTHONDONTWRITEBYTECODE, which CI machines set, keeps Python from caching it itself).
uv sync --locked --all-extras --quiet --compile-bytecode
lowest_sync
# The chat page's browser tests drive Debian's Chromium through Playwright; never a Playwright browser download.
if [ ! -x /usr/bin/chromium ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
# The real browser clients the endpoints are tested against, each Node project from its lockfile, installed
# again only when its lockfile changed: the AI SDK majors (tests/test_web_ai_sdk.py) and @ag-ui/client
# (tests/test_web_ag_ui.py).
for node_project in tests/ai_sdk tests/ag_ui; do
    if ! cmp -s "$node_project/package-lock.json" "$node_project/node_modules/.installed-package-lock.json"; then
        (cd "$node_project" && npm ci --no-audit --no-fund --loglevel=error)
        cp "$node_project/package-lock.json" "$node_project/node_modules/.installed-package-lock.json"
    fi
done
# The official MCP reference servers McpToolSource is tested against (tests/mcp_servers).
install_official_mcp_servers
uv run --locked --no-sync ruff check .
uv run --locked --no-sync ruff format --check .
uv run --locked --no-sync pyright
# The lowest run: the modules whose dependencies have ranges (web: starlette, sse-starlette, uvicorn,
# ag-ui-protocol; mcp: mcp, httpx2; otel: OpenTelemetry; stepwise: pydantic), the kit's public API and
# suites (pytest, pytest-asyncio) and the README examples. The session's own tests (sizes, crashes, chaos,
# turn control) exercise only this package and the exactly pinned SDK, and run once, on the lockfile; so
# do the JavaScript clients' runs (test_web_ai_sdk, test_web_ag_ui) and the 50-turn step race
# (test_web_steps), which test our translation: the other web tests carry the web stack's lowest versions.
lowest_selection=(
  tests/test_web_page.py tests/test_web_protocol.py tests/test_web_questions_and_plans.py
  tests/test_web_readme_serving.py tests/test_web_safety.py tests/test_web_stream_rules.py
  tests/test_web_turn_control.py
  tests/test_mcp_*.py tests/test_kit_mcp*.py tests/test_otel_session.py tests/test_unit_*.py
  tests/test_stepwise_session.py tests/test_stepwise_unit.py tests/test_stepwise_runner.py
  tests/test_testing_public_api.py tests/test_readme_*.py tests/test_runner_contract.py
  tests/test_stepwise_provider_matrix.py
  "${lowest_default_selection[@]}"
)
# The Stepwise provider matrix (LiteLLM's OpenAI and Anthropic clients over HTTP, LiteLLM pinned exactly)
# runs on the lowest versions only, where the kit's server meets the web stack's lowest uvicorn and
# Starlette; the lockfile's run of the same LiteLLM is the in-process matrix.
newest_ignore=(tests/test_stepwise_provider_matrix.py)
# The lockfile run goes as two processes (see both_suites): the session's own long tests, and the rest.
newest_split=(
  tests/test_stepwise_matrix.py tests/test_matrix.py tests/test_long_sessions.py tests/test_bad_input.py
  tests/test_turn_control.py tests/test_chaos.py tests/test_builtin_tools.py tests/test_dispatch_wait.py
  tests/test_stepwise_example.py tests/test_turn_failures.py
  tests/test_tool_tasks.py tests/test_tool_questions.py tests/test_approvals.py tests/test_tool_failures.py
  tests/test_stepwise_desk.py tests/test_mcp_source.py tests/test_mcp_tasks_session.py
)
both_suites "$@"
