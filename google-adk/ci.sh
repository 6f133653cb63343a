#!/usr/bin/env bash
# This package's whole check from a fresh clone: locked install, lint, format, strict types, tests.
set -euo pipefail
cd "$(dirname "$0")"
source ../scripts/lib/ensure-uv.sh
export UV_PYTHON="${UV_PYTHON:-3.11}"
uv sync --locked --all-extras --quiet
uv run --locked --no-sync ruff check .
uv run --locked --no-sync ruff format --check .
uv run --locked --no-sync pyright
# pytest exits 5 when it collects no tests; set -e turns that into a failure, as it must be.
uv run --locked --no-sync pytest -q "$@"
