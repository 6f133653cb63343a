"""An elicitation a server sends during ``tools/call`` as a durable session question, and the call run again.

Over a connection that answers server requests live (the ``initialize`` handshake of 2025-11-25 and
earlier, as the official TypeScript servers speak), an elicitation arrives while the server holds the call
open. Nothing in a tool Step can wait for the user across a Worker kill, so the source does this instead:

1. **A call that may run again** (effect ``read`` or ``idempotent_write``): the first elicitation nobody has
   answered yet becomes a question. The server gets a JSON-RPC error for it, the connection closes (which
   abandons the call on the server), and the tool Step returns `ToolInputRequested` with a continuation
   holding the request. The question is then an ordinary session question: it is stored, survives any Worker
   kill, and is answered with ``answer_question`` or declined with ``resolve_interrupt``.
2. **The answer**: the next run of the tool Step checks the answer against the request before it contacts
   the server. An answer that does not fit is asked again at once, with the reason at the top; nothing
   reaches the server. A fitting one is kept in the continuation, and the call is sent again (same
   idempotency key). When the server asks the same elicitation again (same fingerprint, in the same order),
   it gets the kept result at once; a new elicitation is asked as in step 1, so a call that asks three times
   costs three questions and four runs.
3. **A call that must not run twice** (``non_idempotent_write``, ``unclassified``): its earlier part may have
   taken effect, so it is never run again. Its elicitations are answered ``cancel``, as a user who closed the
   form, and the server finishes the call with that; no question is asked.

A 2026-07-28 server asks the other way: it answers ``tools/call`` with ``input_required`` (its requests
and an opaque ``requestState``) and has finished nothing, so the call is asked about whatever its effect.
Its ``roots/list`` requests are answered from the configuration at once, its elicitations become questions
as above, and ``sampling/createMessage`` fails the call. The ``requestState`` is not kept across the
question: the SDK seals it with a key of the server process and a time limit, and a stdio server is a new
process on every call. The call is sent afresh instead, and the repeated requests get the kept results, so
the server mints a new state and the call goes on with it on the same connection.

Declining the session question (``resolve_interrupt``) rejects the call, as for any tool question, and the
server hears nothing more. The answers ``decline`` and ``cancel`` are offered instead where the server should
hear them: the call runs again and the server gets that action.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import anyio
from mcp.client.session import ClientRequestContext
from mcp.types import (
    INVALID_REQUEST,
    CreateMessageRequest,
    ElicitRequest,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    Root,
)
from pydantic import FileUrl

from dex_agents._tools._outcomes import ToolExecutionError, ToolInputRequested
from dex_agents.mcp._capabilities import SAMPLING_REFUSAL
from dex_agents.mcp._definitions import decode_json_object
from dex_agents.mcp._elicitation import (
    ElicitationAnswerError,
    ElicitationQuestion,
    elicitation_fingerprint,
    read_elicitation,
)
from dex_agents.mcp._roots import McpRoot
from dex_agents.runner import DeferredToolExecution
from dex_agents.values import ToolEffect

__all__ = ["ABANDONED_FOR_QUESTION", "CallElicitations", "prepare_call_elicitations"]

_CONTINUATION_SOURCE = "dex-agents.mcp/call-elicitation"
_RUNS_AGAIN = frozenset({ToolEffect.READ, ToolEffect.IDEMPOTENT_WRITE})
_T = TypeVar("_T")
_logger = logging.getLogger("dex_agents.mcp")

ABANDONED_FOR_QUESTION = (
    "dex-agents asks the user this in its durable session and abandons this call; it calls the tool again "
    "with the answer"
)
"""The JSON-RPC error message an elicitation gets when it becomes a session question."""


@dataclass(frozen=True)
class _Answered:
    fingerprint: str
    result: dict[str, Any]


@dataclass(frozen=True)
class _State:
    """The continuation: the results to give again, and the elicitation the open question asks."""

    answered: tuple[_Answered, ...]
    pending: dict[str, Any] | None

    def encode(self) -> str:
        value: dict[str, Any] = {
            "source": _CONTINUATION_SOURCE,
            "answered": [{"fingerprint": item.fingerprint, "result": item.result} for item in self.answered],
        }
        if self.pending is not None:
            value["pending"] = self.pending
        # Not sorted: a form's fields keep the server's order, which is the order the question lists them in.
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def decode(cls, text: str | None) -> _State | None:
        fields = decode_json_object(text)
        if fields is None or fields.get("source") != _CONTINUATION_SOURCE:
            return None
        answered: list[_Answered] = []
        raw_answered: object = fields.get("answered")
        for item in cast(list[object], raw_answered) if isinstance(raw_answered, list) else []:
            entry = cast(dict[str, Any], item) if isinstance(item, dict) else {}
            fingerprint, result = entry.get("fingerprint"), entry.get("result")
            if not isinstance(fingerprint, str) or not isinstance(result, dict):
                return None
            answered.append(_Answered(fingerprint, cast(dict[str, Any], result)))
        pending: object = fields.get("pending")
        return cls(tuple(answered), cast(dict[str, Any], pending) if isinstance(pending, dict) else None)


class CallElicitations:
    """The elicitations of one ``tools/call`` run: given earlier results, or turned into a question."""

    def __init__(
        self, server_name: str, mcp_name: str, answered: tuple[_Answered, ...], runs_again: bool
    ) -> None:
        """Create the handler.

        Args:
            server_name: The server, for log lines.
            mcp_name: The tool, for log lines.
            answered: The results the user gave on earlier runs, in the order the server asked.
            runs_again: Whether the call may be run again, so an elicitation may become a question.
        """
        self._server_name = server_name
        self._mcp_name = mcp_name
        self._answered = answered
        self._given = 0
        self._runs_again = runs_again
        self._scope = anyio.CancelScope()
        self._asked: ElicitationQuestion | None = None
        self._asked_params: dict[str, Any] | None = None

    def _cancel(self, params: dict[str, Any], why: str) -> ElicitResult:
        _logger.warning(
            "MCP tool %r of server %r asked for input (%r) that %s; answered cancel",
            self._mcp_name,
            self._server_name,
            params.get("message"),
            why,
        )
        return ElicitResult(action="cancel")

    async def handle(
        self, context: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        """Answer one elicitation of the run: the kept result, a question, or ``cancel``."""
        raw = params.model_dump(by_alias=True, mode="json", exclude_none=True)
        raw.pop("_meta", None)
        if self._given < len(self._answered) and self._answered[
            self._given
        ].fingerprint == elicitation_fingerprint(raw):
            result = self._answered[self._given].result
            self._given += 1
            return ElicitResult.model_validate(result)
        if not self._runs_again:
            return self._cancel(raw, "a call that must not run twice cannot wait for (its effect is a write)")
        if self._asked is not None:
            return self._cancel(raw, "came after the question this call already asks")
        question = read_elicitation(raw, offers_actions=True)
        if question is None:
            return self._cancel(
                raw, "the session cannot ask (a form field outside the MCP elicitation schema)"
            )
        self._asked, self._asked_params = question, raw
        # Abandon the call: its work's scope ends, the connection closes, and the Step asks the question.
        self._scope.cancel()
        return ErrorData(code=INVALID_REQUEST, message=ABANDONED_FOR_QUESTION)

    def respond(
        self, answer: InputRequiredResult, roots: tuple[McpRoot, ...]
    ) -> dict[str, ElicitResult | ListRootsResult] | ToolInputRequested:
        """Return the responses to an ``input_required`` answer, or the question one of its requests became.

        Raises:
            ToolExecutionError: It asks for sampling, for roots none are configured for, or for input the
                session cannot ask.
        """
        responses: dict[str, ElicitResult | ListRootsResult] = {}
        for key, request in (answer.input_requests or {}).items():
            if isinstance(request, ListRootsRequest):
                if not roots:
                    raise ToolExecutionError(
                        f"MCP tool {self._mcp_name!r} of server {self._server_name!r} asked for roots, and "
                        "its configuration names none"
                    )
                responses[key] = ListRootsResult(
                    roots=[Root(uri=FileUrl(root.uri), name=root.name) for root in roots]
                )
                continue
            if isinstance(request, CreateMessageRequest):
                raise ToolExecutionError(
                    f"MCP tool {self._mcp_name!r} of server {self._server_name!r} needs sampling: "
                    f"{SAMPLING_REFUSAL}"
                )
            assert isinstance(request, ElicitRequest)
            raw = request.params.model_dump(by_alias=True, mode="json", exclude_none=True)
            raw.pop("_meta", None)
            if self._given < len(self._answered) and self._answered[self._given].fingerprint == (
                elicitation_fingerprint(raw)
            ):
                responses[key] = ElicitResult.model_validate(self._answered[self._given].result)
                self._given += 1
                continue
            question = read_elicitation(raw, offers_actions=True)
            if question is None:
                raise ToolExecutionError(
                    f"MCP tool {self._mcp_name!r} of server {self._server_name!r} asked for input the "
                    f"session cannot ask: {raw.get('message')!r}"
                )
            self._asked, self._asked_params = question, raw
            return self.question()
        return responses

    async def run(self, send: Callable[[], Awaitable[_T]]) -> _T | ToolInputRequested:
        """Run ``send`` (the ``tools/call``), or return the question an elicitation during it became."""
        with self._scope:
            return await send()
        return self.question()

    def question(self) -> ToolInputRequested:
        """The question of the elicitation that abandoned the run."""
        assert self._asked is not None and self._asked_params is not None, "no elicitation abandoned the run"
        state = _State(self._answered[: self._given], self._asked_params)
        return self._asked.to_input_request(state.encode())


def prepare_call_elicitations(
    execution: DeferredToolExecution, server_name: str, mcp_name: str
) -> CallElicitations | ToolInputRequested:
    """Read what earlier runs of the call kept, and the answer to its open question, before calling.

    Returns:
        The handler for this run, or the open question again when its answer does not fit the request.
    """
    record = execution.tool_call
    state = _State.decode(record.input_continuation)
    answered = () if state is None else state.answered
    if state is not None and state.pending is not None and execution.input_answers:
        question = read_elicitation(state.pending, offers_actions=True)
        if question is not None:
            try:
                result = question.result(execution.input_answers[-1])
            except ElicitationAnswerError as error:
                return question.to_input_request(state.encode(), problem=str(error))
            answered = (*answered, _Answered(question.fingerprint, result))
    return CallElicitations(server_name, mcp_name, answered, record.effect in _RUNS_AGAIN)
