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
# The official MCP reference servers the McpToolSource session tests run (the core's tests/mcp_servers).
install_official_mcp_servers
uv run --locked --no-sync ruff check .
uv run --locked --no-sync ruff format --check .
uv run --locked --no-sync pyright
# The provider suites (ADK's LiteLlm through LiteLLM's OpenAI and Anthropic providers against the kit's
# scripted provider server) mostly wait on Workers, Retry-After and timeouts: on the lockfile they run as a
# pytest process of their own beside the rest (see both_suites). LiteLLM is pinned exactly and google-adk's
# lowest is its locked release, so the lowest run leaves the provider suites out. The MCP suites go beside
# them, so both lockfile processes take about as long.
newest_split=(
  tests/test_provider_matrix.py tests/test_provider_faults.py tests/test_mcp_source.py tests/test_mcp.py
)
lowest_selection=(--ignore=tests/test_provider_matrix.py --ignore=tests/test_provider_faults.py "${lowest_default_selection[@]}")
both_suites "$@"
