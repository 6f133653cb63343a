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
# The provider matrix (three provider clients, each with its own devserver and Worker: about 45 s) and the
# scripted matrix (about 40 s) go as one process beside the rest of the lockfile run (about 90 s). The
# provider matrix stays out of the lowest run, where tests/test_provider_answers.py reads the same clients'
# answers on the lowest versions in about a second. The demo through a real client
# (tests/test_demo_real_provider.py) runs on the lockfile only.
newest_split=(tests/test_provider_matrix.py tests/test_matrix.py)
lowest_selection=(
  --ignore=tests/test_provider_matrix.py --ignore=tests/test_demo_real_provider.py
  "${lowest_default_selection[@]}"
)
both_suites "$@"
