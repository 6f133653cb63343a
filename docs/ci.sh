#!/usr/bin/env bash
# The documentation site's whole check from a fresh clone: scripts/docs, the strict MkDocs build and every
# runnable page run in its package's environment (see README.md). scripts/test passes pytest's --junitxml to
# every ci.sh; the site has no pytest suite of its own, so there is nothing to write there.
set -euo pipefail
cd "$(dirname "$0")"
exec ../scripts/docs
