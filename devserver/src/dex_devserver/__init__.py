"""A single-process, Dex-compatible development server for tests and local development."""

from ._cli import main
from ._server import DevServer, ServerOptions

__all__ = ["DevServer", "ServerOptions", "main"]
