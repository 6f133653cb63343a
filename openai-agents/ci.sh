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
# The provider suites (the SDK's OpenAI models against the scripted provider server) run as a process of
# their own beside the rest of the lockfile run; the lowest run takes the Chat Completions items and the
# provider fault tests (the client's oldest version reads cut and unfinished streams its own way), and leaves
# the Responses class, whose other items exercise the session rather than the client, to the lockfile run.
newest_split=(tests/test_provider_matrix.py tests/test_provider_faults.py)
lowest_selection=(-k "not test_17_a_session_of_large_messages_past_20_mib and not ProviderMatrix")
both_suites "$@"
