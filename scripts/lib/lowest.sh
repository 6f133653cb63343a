# Sourced by a package's ci.sh: its suite on the lowest versions its dependency ranges allow.
#
# lowest-versions.txt, committed beside pyproject.toml and written by scripts/lowest-versions, pins every
# package of that environment, with each direct dependency at the lower bound of its range (the test tools
# at their locked versions). It is installed as it is, with its hashes, into .venv-lowest, and
# check_lowest.py refuses a file whose pins no longer match the ranges in pyproject.toml.
lowest_env=".venv-lowest"

lowest_sync() {
  python3 ../scripts/lib/check_lowest.py pyproject.toml lowest-versions.txt
  uv venv --quiet --allow-existing --python "${UV_PYTHON:-3.11}" "$lowest_env"
  VIRTUAL_ENV="$lowest_env" uv pip sync --quiet --compile-bytecode lowest-versions.txt
  VIRTUAL_ENV="$lowest_env" uv pip install --quiet --no-deps --compile-bytecode -e .
}

# pytest in the lowest environment; a --junitxml=FILE.xml argument becomes FILE-lowest.xml.
lowest_pytest() {
  local arguments=() argument
  for argument in "$@"; do
    case "$argument" in
      --junitxml=*.xml) arguments+=("${argument%.xml}-lowest.xml") ;;
      *) arguments+=("$argument") ;;
    esac
  done
  "$lowest_env/bin/python" -m pytest -q ${arguments[@]+"${arguments[@]}"}
}

# The package's suite on the lockfile and on the lowest versions, both at once (the suites wait on Worker
# processes more than they compute); the lowest run's output follows the newest run's. A ci.sh whose
# tests must run in a wrapper (claude-agent-sdk's network namespace) sets the array suite_wrapper first.
# Fails when either run fails; pytest exits 5 when it collects no tests, which fails too, as it must.
#
# The lowest run leaves out what only our code and the exactly pinned SDK decide, so that scripts/test
# stays within its time budget: matrix item 17 (a 20 MiB session across Worker kills, up to three minutes
# with the real Claude Code CLI) everywhere, and in the core every test but those of the modules whose
# dependencies have ranges (core/ci.sh sets lowest_selection to those).
lowest_default_selection=(-k "not test_17_a_session_of_large_messages_past_20_mib")
both_suites() {
  local lowest_log lowest_pid newest=0 lowest=0
  local wrapper=(${suite_wrapper[@]+"${suite_wrapper[@]}"})
  local selection=(${lowest_selection[@]+"${lowest_selection[@]}"})
  [ ${#selection[@]} -gt 0 ] || selection=("${lowest_default_selection[@]}")
  lowest_log="$(mktemp)"
  ${wrapper[@]+"${wrapper[@]}"} bash -c 'source ../scripts/lib/lowest.sh && lowest_pytest "$@"' lowest \
    "${selection[@]}" "$@" >"$lowest_log" 2>&1 &
  lowest_pid=$!
  ${wrapper[@]+"${wrapper[@]}"} uv run --locked --no-sync pytest -q "$@" || newest=$?
  wait "$lowest_pid" || lowest=$?
  echo "--- the same tests on the lowest versions (lowest-versions.txt):"
  cat "$lowest_log"
  rm -f "$lowest_log"
  [ "$newest" -eq 0 ] && [ "$lowest" -eq 0 ]
}
