"""The matrix can fail: a runner that ignores tool policies lets a single-attempt write run twice, one that
answers an unknown tool with an empty success hides from the model why the call did nothing, and one that
calls the model twice when a turn resumes makes a hidden model call."""

from pathlib import Path

from tests.nested_pytest import run_nested_pytest


def test_matrix_fails_for_a_runner_that_ignores_policies_hides_an_unknown_tool_or_calls_twice(
    tmp_path: Path,
) -> None:
    output = run_nested_pytest(
        tmp_path, "tests/broken_agents.py", "-k", "test_5_ or test_11_ or test_12_ or test_13_", timeout=170
    )
    # Called a read, the single-attempt write is retried after the Worker is killed inside it, so it runs
    # twice and item 5 fails; an ordinary turn (item 11) still passes.
    assert "FAILED tests/broken_agents.py::TestBrokenMatrix::test_5_" in output, output[-3000:]
    assert "assert 2 == 1" in output, output[-3000:]
    # Item 12: the unknown tool's call "succeeds" with no output, so the next model call never sees why.
    assert "FAILED tests/broken_agents.py::TestBrokenMatrix::test_12_" in output, output[-3000:]
    assert "assert \"unknown tool 'launch_rocket'\" in " in output, output[-3000:]
    # Item 13: the resumed model call ran twice in one attempt of one Worker.
    assert "FAILED tests/broken_agents.py::TestBrokenMatrix::test_13_" in output, output[-3000:]
    assert "made 2 model calls in Worker" in output, output[-3000:]
    assert "3 failed, 1 passed" in output, output[-3000:]
