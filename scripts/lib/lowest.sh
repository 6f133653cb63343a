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

# Sets the array `suffixed` to the arguments after the first, with a --junitxml=FILE.xml argument
# renamed FILE<suffix>.xml (the first argument), so two pytest runs of one package write two JUnit files.
with_junit_suffix() {
  local suffix=$1 argument
  shift
  suffixed=()
  for argument in "$@"; do
    case "$argument" in
      --junitxml=*.xml) suffixed+=("${argument%.xml}$suffix.xml") ;;
      *) suffixed+=("$argument") ;;
    esac
  done
}

# pytest in the lowest environment; a --junitxml=FILE.xml argument becomes FILE-lowest.xml.
lowest_pytest() {
  with_junit_suffix -lowest "$@"
  "$lowest_env/bin/python" -m pytest -q ${suffixed[@]+"${suffixed[@]}"}
}

# The package's suite on the lockfile and on the lowest versions, both at once (the suites wait on Worker
# processes more than they compute); the lowest run's output follows the newest run's. A ci.sh whose
# tests must run in a wrapper (claude-agent-sdk's network namespace) sets the array suite_wrapper first.
# Fails when either run fails; pytest exits 5 when it collects no tests, which fails too, as it must.
#
# A ci.sh whose newest run outlasts the lowest one by minutes sets newest_split to some of its test files:
# the newest run then goes as two pytest processes at once, those files and the rest (its second JUnit
# file ends in -rest.xml), so neither core idles while the longest run finishes alone.
#
# The lowest run leaves out what only our code and the exactly pinned SDK decide, so that scripts/test
# stays within its time budget: matrix item 17 (a 20 MiB session across Worker kills, up to three minutes
# with the real Claude Code CLI) everywhere, and in the core every test but those of the modules whose
# dependencies have ranges (core/ci.sh sets lowest_selection to those).
lowest_default_selection=(-k "not test_17_a_session_of_large_messages_past_20_mib")
# A ci.sh whose suites mostly wait (timeouts, backoffs, a killed server's restart) sets lowest_split too:
# the lowest run then also goes as two processes, those files and the rest (JUnit ...-rest-lowest.xml).
# It needs the default lowest selection, since a selection of paths cannot be split by --ignore.
#
# A ci.sh whose lowest run has minutes of slack sets newest_ignore to test files that run on the lowest
# versions only (listed in its lowest_selection too): the newest run leaves them out.
both_suites() {
  local lowest_log lowest_pid rest_log rest_pid newest=0 lowest=0 rest=0
  local lowest_rest_log="" lowest_rest_pid="" lowest_rest=0
  local lowest_files=(${lowest_split[@]+"${lowest_split[@]}"})
  local wrapper=(${suite_wrapper[@]+"${suite_wrapper[@]}"})
  local selection=(${lowest_selection[@]+"${lowest_selection[@]}"})
  local split=(${newest_split[@]+"${newest_split[@]}"})
  local skipped=() ignored
  for ignored in ${newest_ignore[@]+"${newest_ignore[@]}"}; do skipped+=("--ignore=$ignored"); done
  [ ${#selection[@]} -gt 0 ] || selection=("${lowest_default_selection[@]}")
  # Split only a whole run: arguments that choose tests (paths, -k) go to one pytest as they are.
  local chooses=0 given
  for given in "$@"; do case "$given" in --junitxml=*) ;; *) chooses=1 ;; esac; done
  with_junit_suffix -rest "$@"
  local rest_arguments=(${suffixed[@]+"${suffixed[@]}"})
  lowest_log="$(mktemp)"
  if [ ${#lowest_files[@]} -gt 0 ] && [ "$chooses" -eq 0 ]; then
    local lowest_ignores=() file
    for file in "${lowest_files[@]}"; do lowest_ignores+=("--ignore=$file"); done
    lowest_rest_log="$(mktemp)"
    ${wrapper[@]+"${wrapper[@]}"} bash -c 'source ../scripts/lib/lowest.sh && lowest_pytest "$@"' lowest \
      "${selection[@]}" "${lowest_ignores[@]}" ${rest_arguments[@]+"${rest_arguments[@]}"} >"$lowest_rest_log" 2>&1 &
    lowest_rest_pid=$!
    ${wrapper[@]+"${wrapper[@]}"} bash -c 'source ../scripts/lib/lowest.sh && lowest_pytest "$@"' lowest \
      "${selection[@]}" "${lowest_files[@]}" "$@" >"$lowest_log" 2>&1 &
  else
    ${wrapper[@]+"${wrapper[@]}"} bash -c 'source ../scripts/lib/lowest.sh && lowest_pytest "$@"' lowest \
      "${selection[@]}" "$@" >"$lowest_log" 2>&1 &
  fi
  lowest_pid=$!
  if [ ${#split[@]} -gt 0 ] && [ "$chooses" -eq 0 ]; then
    local ignores=() file
    for file in "${split[@]}"; do ignores+=("--ignore=$file"); done
    rest_log="$(mktemp)"
    ${wrapper[@]+"${wrapper[@]}"} uv run --locked --no-sync pytest -q "${ignores[@]}" \
      ${skipped[@]+"${skipped[@]}"} ${rest_arguments[@]+"${rest_arguments[@]}"} >"$rest_log" 2>&1 &
    rest_pid=$!
    ${wrapper[@]+"${wrapper[@]}"} uv run --locked --no-sync pytest -q "${split[@]}" \
      ${skipped[@]+"${skipped[@]}"} "$@" || newest=$?
    wait "$rest_pid" || rest=$?
    echo "--- the rest of the tests on the lockfile:"
    cat "$rest_log"
    rm -f "$rest_log"
  else
    ${wrapper[@]+"${wrapper[@]}"} uv run --locked --no-sync pytest -q ${skipped[@]+"${skipped[@]}"} "$@" \
      || newest=$?
  fi
  wait "$lowest_pid" || lowest=$?
  echo "--- the same tests on the lowest versions (lowest-versions.txt):"
  cat "$lowest_log"
  rm -f "$lowest_log"
  if [ -n "$lowest_rest_pid" ]; then
    wait "$lowest_rest_pid" || lowest_rest=$?
    echo "--- the rest of the tests on the lowest versions:"
    cat "$lowest_rest_log"
    rm -f "$lowest_rest_log"
  fi
  [ "$newest" -eq 0 ] && [ "$rest" -eq 0 ] && [ "$lowest" -eq 0 ] && [ "$lowest_rest" -eq 0 ]
}
