"""How a scripted model streams its answer's text."""

from __future__ import annotations

import re

__all__ = ["text_chunks"]

# A word with the whitespace after it, or whitespace that no word precedes (at the start of the text).
_CHUNK = re.compile(r"\S+\s*|\s+")


def text_chunks(text: str) -> list[str]:
    """Split a scripted answer's text into the chunks a scripted model streams.

    Each chunk is one word with the whitespace after it, and leading whitespace is a chunk of its own, so
    the chunks add up to ``text`` exactly and a test can compare the streamed deltas with the stored text.

    Args:
        text: The answer's text.

    Returns:
        The chunks in order; none for empty text.
    """
    return _CHUNK.findall(text)
