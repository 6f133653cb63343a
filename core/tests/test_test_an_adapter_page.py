"""The docs page "Test an adapter" shows its first test's files exactly as they are in this directory.

The page marks each block with ``<!-- example: core/tests/<file> -->``; a block is the file without its
module docstring, so the example the page shows is the one `tests/test_readme_example.py` runs.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "pages" / "how-to" / "test-an-adapter.md"
EXAMPLE = re.compile(r"<!-- example: (?P<path>\S+) -->\n```python\n(?P<code>.*?)```", re.DOTALL)
FILES = ["core/tests/my_agent.py", "core/tests/my_worker.py", "core/tests/test_readme_example.py"]


def without_docstring(text: str) -> str:
    """The file's text without its module docstring and the blank line after it."""
    if not text.startswith('"""'):
        return text
    end = text.index('"""', 3) + len('"""')
    return text[end:].removeprefix("\n").removeprefix("\n")


def test_the_page_shows_the_first_test_as_it_runs() -> None:
    shown = {match["path"]: match["code"] for match in EXAMPLE.finditer(PAGE.read_text(encoding="utf-8"))}
    assert sorted(shown) == FILES
    for path, code in shown.items():
        assert code == without_docstring((ROOT / path).read_text(encoding="utf-8")), path
