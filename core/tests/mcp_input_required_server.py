"""A stdio MCP server (mcp 2.x, protocol 2026-07-28) whose tool asks for input with ``input_required``.

``ship`` needs a carrier (a form elicitation) and the client's roots; the SDK answers ``tools/call`` with an
``InputRequiredResult`` for both and finishes when the client sends the call again with the responses and
the echoed ``requestState``. Each ``tools/call`` it receives is appended to the log file named by argv[1].
"""

import sys
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import Elicit, ListRoots, MCPServer, Resolve
from mcp.types import ListRootsResult
from pydantic import BaseModel

_LOG = Path(sys.argv[1])
server = MCPServer("desk")


class Carrier(BaseModel):
    carrier: str


def ask_carrier(sku: str) -> Elicit[Carrier]:
    return Elicit(f"Which carrier ships {sku}?", Carrier)


def ask_roots() -> ListRoots:
    return ListRoots()


@server.tool()
def ship(
    sku: str,
    carrier: Annotated[Carrier, Resolve(ask_carrier)],
    roots: Annotated[ListRootsResult, Resolve(ask_roots)],
) -> str:
    """Ship one item from the first root's warehouse."""
    with _LOG.open("a") as log:
        log.write(f"shipped {sku} {carrier.carrier}\n")
    return f"shipped {sku} with {carrier.carrier} from {roots.roots[0].uri}"


if __name__ == "__main__":
    server.run("stdio")
