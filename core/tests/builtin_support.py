"""What the built-in tool, plan mode, question and task tests share: one stack per module and its helpers."""

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dex_agents import AgentEvent, AgentInterrupt, AgentSessionClient, AgentSnapshot, AgentToolCall
from dex_agents.testing import (
    AgentTestStack,
    Invocation,
    ScriptedResponse,
    ScriptedToolCall,
    executed_step_types,
    read_agent_events,
    wait_for_agent_snapshot,
    wait_for_turn_end,
    wait_until,
)
from tests.builtin_agents import BuiltInFlows

READ, RECEIPT, REFUND, CANCEL = "lookup_order", "send_receipt", "refund_order", "cancel_order"


def call(tool_name: str, tool_call_id: str, **behaviour: Any) -> ScriptedToolCall:
    """A scripted call of a matrix tool on order A-1."""
    return ScriptedToolCall(tool_name, {"order_id": "A-1"}, tool_call_id, **behaviour)


def payloads(events: Sequence[AgentEvent], event_type: str) -> list[dict[str, Any]]:
    return [json.loads(event.payload) for event in events if event.type == event_type]


@dataclass
class BuiltIns:
    stack: AgentTestStack
    flows: BuiltInFlows

    @property
    def sessions(self) -> AgentSessionClient:
        return self.stack.sessions(self.flows.main)

    @property
    def deadline_sessions(self) -> AgentSessionClient:
        return self.stack.sessions(self.flows.deadline)

    def script(self, session: str, *turns: Sequence[ScriptedResponse]) -> None:
        self.stack.scripts.set_turns(session, turns)

    def model_calls(self, session: str, turn_id: str | None = None) -> list[Invocation]:
        return self.stack.invocations.model_calls(session, turn_id)

    def runs(self, session: str, tool_name: str) -> list[Invocation]:
        return self.stack.invocations.tool_calls(session, tool_name)

    def task_events(self, session: str, kind: str, tool_call_id: str | None = None) -> list[Invocation]:
        return self.stack.invocations.tool_task_events(session, kind, tool_call_id)  # pyright: ignore[reportArgumentType]

    async def replace_worker(self) -> None:
        self.stack.kill_workers()
        await self.stack.start_worker()

    async def steps(self, session: str) -> list[str]:
        return executed_step_types(await self.stack.read_step_history(session))

    async def events(self, sessions: AgentSessionClient, session: str) -> list[AgentEvent]:
        return await read_agent_events(sessions, session)


async def pending_interrupt(sessions: AgentSessionClient, session: str, interrupt_id: str) -> AgentInterrupt:
    return await wait_for_agent_snapshot(
        sessions,
        session,
        lambda snapshot: next(
            (item for item in snapshot.pending_interrupts if item.interrupt_id == interrupt_id), None
        ),
        description=f"the pending interrupt {interrupt_id}",
    )


async def tool_call_record(
    sessions: AgentSessionClient, session: str, tool_call_id: str, status: str
) -> AgentToolCall:
    return await wait_for_agent_snapshot(
        sessions,
        session,
        lambda snapshot: next(
            (
                record
                for record in snapshot.tool_calls
                if record.tool_call_id == tool_call_id and record.status == status
            ),
            None,
        ),
        description=f"tool call {tool_call_id} {status}",
    )


async def a_normal_turn_works(
    built_ins: BuiltIns, sessions: AgentSessionClient, session: str, turn_count: int
) -> AgentSnapshot:
    """Send one more message, scripted as a plain answer, and check the session answers it."""
    built_ins.stack.scripts.add_turn(session, ScriptedResponse(text="Still here."))
    assert await sessions.send_user_message(session, "Still there?")
    done = await wait_for_turn_end(sessions, session, turn_count)
    assert done.state is not None and done.state.last_turn_error is None, done.state
    assert done.messages[-1].text == "Still here.", done.messages
    return done


async def wait_for_event(sessions: AgentSessionClient, session: str, event_type: str) -> None:
    """Wait until the session's event Stream holds an event of ``event_type``."""

    async def written() -> bool:
        page = await sessions.list_agent_events(session, page_size=200)
        return any(message.value.type == event_type for message in page.messages)

    await wait_until(f"a {event_type} event", written)
