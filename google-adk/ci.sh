#!/usr/bin/env bash
# This package's whole check from a fresh clone: locked install, lint, format, strict types, tests.
set -euo pipefail
cd "$(dirname "$0")"
source ../scripts/lib/ensure-uv.sh
export UV_PYTHON="${UV_PYTHON:-3.11}"
# Compiled once here, so the many Worker processes the tests start read bytecode instead of compiling their
# imports each time (PYTHONDONTWRITEBYTECODE, which CI machines set, keeps Python from caching it itself).
uv sync --locked --all-extras --quiet --compile-bytecode
uv run --locked --no-sync ruff check .
uv run --locked --no-sync ruff format --check .
uv run --locked --no-sync pyright
# pytest exits 5 when it collects no tests; set -e turns that into a failure, as it must be.
uv run --locked --no-sync pytest -q "$@"
