"""The files a README spells out, read back from its text so a test can run exactly what users copy."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["readme_snippets"]

_SNIPPET = re.compile(
    r"^<!-- file: (?P<name>[^\s>]+) -->\n```[a-z]*\n(?P<code>.*?)^```$", re.MULTILINE | re.DOTALL
)


def readme_snippets(readme: Path) -> dict[str, str]:
    """Return the code blocks a README marks as files, by file name.

    A block is marked by an HTML comment on the line just before its fence, ``<!-- file: worker.py -->``,
    which Markdown renders as nothing. A test writes the blocks to a directory and runs them, so the README
    cannot drift from code that works.

    Args:
        readme: The README's path.

    Returns:
        Each marked block's code, by the name in its marker.

    Raises:
        ValueError: If two blocks carry the same name.
    """
    snippets: dict[str, str] = {}
    for match in _SNIPPET.finditer(readme.read_text(encoding="utf-8")):
        name = match.group("name")
        if name in snippets:
            raise ValueError(f"{readme} marks two code blocks as {name!r}")
        snippets[name] = match.group("code")
    return snippets
