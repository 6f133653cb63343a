"""The roots a server configuration offers, and the answer to a server's ``roots/list``.

Roots are part of the Worker's configuration, like the command or URL: a session never names one. A server
whose configuration has no roots gets no roots capability declared, so it knows not to ask (see the
MCP how-to's capabilities table).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from mcp.client.session import ClientRequestContext, ListRootsFnT
from mcp.types import ListRootsResult, Root
from pydantic import FileUrl

__all__ = ["McpRoot", "check_roots", "roots_callback"]


@dataclass(frozen=True)
class McpRoot:
    """A directory or file the Worker lets an MCP server work in, offered when the server asks ``roots/list``.

    Attributes:
        uri: A ``file://`` URI, such as ``Path("/srv/shared").as_uri()``.
        name: A name the server may show; `None` for none.
    """

    uri: str
    name: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.uri, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"a root's uri must be text, got {type(self.uri).__name__}")
        parts = urlsplit(self.uri)
        # MCP roots are file:// URIs only; anything else a server could not use as a directory.
        if parts.scheme != "file" or not parts.path:
            raise ValueError(f"a root must be a file:// URI with a path, got {self.uri!r}")
        if self.name is not None and not isinstance(self.name, str):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise TypeError(f"a root's name must be text or None, got {type(self.name).__name__}")


def check_roots(server_name: str, roots: Sequence[McpRoot | str | Path]) -> tuple[McpRoot, ...]:
    """Return a server configuration's roots as `McpRoot` values.

    A path is taken as the ``file://`` URI of its absolute form, and text as a URI.

    Raises:
        TypeError: If ``roots`` is one text or path, or holds anything else.
        ValueError: If a URI is not a ``file://`` URI with a path.
    """
    if isinstance(roots, str | Path):
        raise TypeError(
            f"the roots of MCP server {server_name!r} must be a sequence, not one {type(roots).__name__}"
        )
    checked: list[McpRoot] = []
    for root in roots:
        if isinstance(root, Path):
            checked.append(McpRoot(root.absolute().as_uri()))
        elif isinstance(root, str):
            checked.append(McpRoot(root))
        elif isinstance(root, McpRoot):  # pyright: ignore[reportUnnecessaryIsInstance]
            checked.append(root)
        else:
            raise TypeError(
                f"a root of MCP server {server_name!r} must be McpRoot, a file:// URI or a Path, "
                f"got {type(root).__name__}"
            )
    return tuple(checked)


def roots_callback(roots: Sequence[McpRoot]) -> ListRootsFnT | None:
    """Return the SDK callback that answers ``roots/list`` with ``roots``; `None` for no roots.

    The MCP SDK declares the roots capability exactly when it is given this callback.
    """
    if not roots:
        return None
    result = ListRootsResult(roots=[Root(uri=FileUrl(root.uri), name=root.name) for root in roots])

    async def list_roots(context: ClientRequestContext) -> ListRootsResult:
        return result

    return list_roots
