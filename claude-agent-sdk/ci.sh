#!/usr/bin/env bash
# This package's whole check from a fresh clone: locked install, lint, format, strict types, and the tests
# twice at once: on the lockfile (the newest versions) and on the lowest versions the ranges allow
# (lowest-versions.txt, see ../scripts/lib/lowest.sh).
# The tests run the real Claude Code CLI, so they run inside a fresh network namespace whose only link is
# loopback (`unshare -n`, as root): the CLI, the scripted Messages API and the devserver reach each other
# on 127.0.0.1, and nothing can leave the machine.
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
if ! unshare -n true 2>/dev/null; then
  echo "error: 'unshare -n' is not permitted here; the CLI tests must run without network (run as root)" >&2
  exit 1
fi
# The CLI, the scripted API, the devserver and the Workers reach each other on loopback only.
suite_wrapper=(unshare -n bash -c 'ip link set lo up && exec "$@"' in-namespace)
# The matrix (two thirds of the lockfile run's time) goes as its own process beside the rest (see both_suites).
newest_split=(tests/test_matrix.py)
both_suites "$@"
