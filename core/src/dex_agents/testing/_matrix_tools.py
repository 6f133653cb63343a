"""The matrix's scripted tools, and the session options that classify them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import timedelta

from dex_agents import AgentSessionOptions, ToolEffect, ToolPolicy
from dex_agents.testing._script import run_scripted_tool

__all__ = [
    "MATRIX_TOOLS",
    "MatrixToolNames",
    "ScriptedTool",
    "cancel_order",
    "lookup_order",
    "matrix_session_options",
    "refund_order",
    "send_receipt",
]

ScriptedTool = Callable[..., Awaitable[str]]
"""An async tool function returning its result text."""


async def lookup_order(order_id: str) -> str:
    """Look up an order's status (a read: retried freely).

    Args:
        order_id: The order to look up.

    Returns:
        The order's status.
    """
    return await run_scripted_tool("lookup_order", {"order_id": order_id})


async def send_receipt(order_id: str) -> str:
    """Email the receipt of an order (an idempotent write: retried with the same idempotency key).

    Args:
        order_id: The order whose receipt is sent.

    Returns:
        A confirmation.
    """
    return await run_scripted_tool("send_receipt", {"order_id": order_id})


async def refund_order(order_id: str) -> str:
    """Refund an order (a non-idempotent write that needs approval: runs at most once).

    Args:
        order_id: The order to refund.

    Returns:
        A confirmation.
    """
    return await run_scripted_tool("refund_order", {"order_id": order_id})


async def cancel_order(order_id: str) -> str:
    """Cancel an order (a non-idempotent write without approval: runs at most once).

    Args:
        order_id: The order to cancel.

    Returns:
        A confirmation.
    """
    return await run_scripted_tool("cancel_order", {"order_id": order_id})


MATRIX_TOOLS: tuple[ScriptedTool, ...] = (lookup_order, send_receipt, refund_order, cancel_order)
"""The matrix's tools, one per effect class; each takes ``order_id: str`` and returns text."""


@dataclass(frozen=True)
class MatrixToolNames:
    """The names under which an agent exposes the matrix's four tools.

    Attributes:
        read: A ``read`` tool.
        idempotent_write: An ``idempotent_write`` tool.
        approval_write: A ``non_idempotent_write`` tool that needs approval.
        single_attempt_write: A ``non_idempotent_write`` tool that needs no approval.
    """

    read: str = "lookup_order"
    idempotent_write: str = "send_receipt"
    approval_write: str = "refund_order"
    single_attempt_write: str = "cancel_order"

    def policies(self) -> Mapping[str, ToolPolicy]:
        """Return the explicit policy of each tool."""
        return {
            self.read: ToolPolicy(ToolEffect.READ),
            self.idempotent_write: ToolPolicy(ToolEffect.IDEMPOTENT_WRITE),
            self.approval_write: ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=True),
            self.single_attempt_write: ToolPolicy(ToolEffect.NON_IDEMPOTENT_WRITE, requires_approval=False),
        }


def matrix_session_options(
    names: MatrixToolNames | None = None,
    *,
    interrupt_deadline: timedelta | None = None,
    built_in_tools: Collection[str] = (),
) -> AgentSessionOptions:
    """Return session options with an explicit policy for each matrix tool.

    Args:
        names: The tool names; the defaults match :data:`MATRIX_TOOLS`.
        interrupt_deadline: An approval deadline, when the Flow needs one.
        built_in_tools: The built-in tools to enable.

    Returns:
        The options.
    """
    return AgentSessionOptions(
        tool_policies=dict((names or MatrixToolNames()).policies()),
        interrupt_deadline=interrupt_deadline,
        built_in_tools=built_in_tools,
    )
