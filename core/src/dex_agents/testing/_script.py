"""Scripted models and tools: what each model call answers and how each real tool behaves.

A test writes a session's script (one list of :class:`ScriptedResponse` per turn) to a :class:`ScriptStore`
in the stack's state directory before it sends the turn's message. In the Worker child, a scripted model
asks :func:`scripted_model_response` for its answer, and scripted tools call :func:`run_scripted_tool` (or,
for a tool the framework runs inline inside ``RunModel``, :func:`run_inline_scripted_tool`).
Both find the script through ``DEX_AGENTS_TEST_STATE_DIR``, which :class:`AgentTestStack` sets.

Which response a model call gets is derived from committed state only, so a retried or redelivered model
call gets the same answer: the turn number comes from the turn ID, and the position within the turn is the
number of the turn's scripted responses whose tool calls all have records already.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, cast, get_args

from dex_agents import ToolExecutionError, current_tool_execution
from dex_agents.testing._gates import FileGate
from dex_agents.testing._invocations import Invocation, InvocationKind, InvocationLog
from dex_agents.testing._scripted_tasks import (
    ScriptedQuestion,
    ScriptedTask,
    answers_suffix,
    ask_scripted_questions,
    hold_first_arrival,
    question_from_json,
    start_scripted_task,
    task_from_json,
)

__all__ = [
    "DEFAULT_SCRIPTED_SUMMARY",
    "LOGGED_MODEL_INPUT_BYTES",
    "LOGGED_TEXT_CUT",
    "STATE_DIR_ENV",
    "ModelCallScope",
    "ProviderFault",
    "ProviderFaultKind",
    "ScriptStore",
    "ScriptedResponse",
    "ScriptedToolCall",
    "current_model_call",
    "logged_model_input",
    "model_call_scope",
    "run_inline_scripted_tool",
    "run_scripted_tool",
    "script_store_scope",
    "scripted_model_response",
    "scripted_summary_response",
    "scripted_tool_output",
]

DEFAULT_SCRIPTED_SUMMARY = "The scripted summary of the earlier conversation."
"""What an adapter's scripted model answers a summary call whose script gives no text (a summary is never
blank)."""
STATE_DIR_ENV = "DEX_AGENTS_TEST_STATE_DIR"
"""The directory holding scripts, gates and the invocation log; the stack sets it for Workers."""
LOGGED_TEXT_CUT = " [... {size} bytes in all, cut in the invocation log ...] "
"""What replaces the middle of a long text in the invocation log of a large model input."""
SCRIPTED_MODEL_FAILURE = "scripted model failure"
"""The start of the message a scripted model raises on a failing attempt."""
SCRIPTED_TOOL_FAILURE = "scripted tool failure"
"""The start of the message a scripted tool raises (not a ``ToolExecutionError``) on a failing attempt."""


@dataclass(frozen=True)
class ScriptedToolCall:
    """A tool call in a scripted model response, and how the real tool behaves when it runs.

    Attributes:
        tool_name: The tool the model calls.
        arguments: The call's arguments (a JSON object).
        tool_call_id: The call's ID, unique within the turn.
        gate: A gate name: the first run that reaches ``stack.gate(session_id, gate)`` on one of
            ``gate_attempts`` waits there until the test releases it; later runs pass.
        gate_attempts: The attempts that stop at ``gate``.
        fail_attempts: Attempts on which the tool raises ``RuntimeError`` (a Step failure, retried by policy).
        error: When set, the tool raises ``ToolExecutionError(error)`` (the model sees it; not retried).
        output: The tool's result; by default a text naming the tool and its arguments.
        output_size: When positive, the result is this many bytes (for oversized-output tests).
        asks: Questions the tool asks the user, in order, before it takes effect (through
            ``dex_agents.ask_user_input``): a run without every answer stops, logged as
            ``"tool_question"``, and the run with them logs ``"tool"`` and adds the answers to its output.
        task: A remote task the tool starts (through ``dex_agents.start_tool_task``) instead of returning
            its result; :class:`ScriptedRunner` polls and cancels it.
    """

    tool_name: str
    arguments: Mapping[str, object]
    tool_call_id: str
    gate: str | None = None
    gate_attempts: tuple[int, ...] = (1,)
    fail_attempts: tuple[int, ...] = ()
    error: str | None = None
    output: str | None = None
    output_size: int = 0
    asks: tuple[ScriptedQuestion, ...] = ()
    task: ScriptedTask | None = None

    @property
    def arguments_json(self) -> str:
        """The arguments as compact JSON text with sorted keys."""
        return json.dumps(dict(self.arguments), sort_keys=True, separators=(",", ":"))


ProviderFaultKind = Literal[
    "rate_limit",
    "server_error",
    "overloaded",
    "cut_stream",
    "unfinished_stream",
    "slow_first_byte",
    "malformed_arguments",
    "context_length",
]
"""The provider faults :func:`~dex_agents.testing.scripted_provider_server` can answer a request with."""


@dataclass(frozen=True)
class ProviderFault:
    """A fault the scripted provider server answers a model call's HTTP request with.

    Only the scripted provider server (`dex_agents.testing.scripted_provider_server`) reads it; scripted
    models in the framework's model slot ignore it.

    Attributes:
        kind: ``"rate_limit"``: HTTP 429 with ``Retry-After``. ``"server_error"``: HTTP 500.
            ``"overloaded"``: Anthropic's 529 ``overloaded_error``, OpenAI's 503, with ``Retry-After``.
            ``"cut_stream"``: part of the answer, then the connection closes mid-body.
            ``"unfinished_stream"``: the answer ends cleanly but without its finish reason (no
            ``finish_reason``, no ``response.completed``, no ``stop_reason``).
            ``"slow_first_byte"``: nothing for ``delay_seconds``, then the answer.
            ``"malformed_arguments"``: every tool call's arguments are cut JSON text.
            ``"context_length"``: HTTP 400 with the provider's context-length error.
        attempts: The ``RunModel`` attempts it applies to.
        requests: Which HTTP requests of such an attempt, counting from 1 (a client that retries by itself
            sends several in one attempt); ``None`` for all of them.
        retry_after_seconds: The ``Retry-After`` of a rate limit or an overload.
        delay_seconds: How long a slow first byte takes.
        min_request_bytes: Only requests whose body has at least this many bytes get it, as a provider
            refuses only an input over its context window (so a compacted input passes).
    """

    kind: ProviderFaultKind
    attempts: tuple[int, ...] = (1,)
    requests: tuple[int, ...] | None = (1,)
    retry_after_seconds: float = 1.0
    delay_seconds: float = 5.0
    min_request_bytes: int = 0

    def __post_init__(self) -> None:
        if self.kind not in get_args(ProviderFaultKind):
            raise ValueError(f"kind must be one of {list(get_args(ProviderFaultKind))}, got {self.kind!r}")

    def applies_to(self, attempt: int, request: int, request_bytes: int = 0) -> bool:
        """Whether the ``request``-th HTTP request of ``attempt``, of ``request_bytes``, gets this fault."""
        return (
            attempt in self.attempts
            and (self.requests is None or request in self.requests)
            and request_bytes >= self.min_request_bytes
        )


def _fault_from_json(data: Mapping[str, Any]) -> ProviderFault:
    requests = data.get("requests")
    return ProviderFault(
        kind=data["kind"],
        attempts=tuple(data.get("attempts", (1,))),
        requests=None if requests is None else tuple(requests),
        retry_after_seconds=data.get("retry_after_seconds", 1.0),
        delay_seconds=data.get("delay_seconds", 5.0),
        min_request_bytes=data.get("min_request_bytes", 0),
    )


@dataclass(frozen=True)
class ScriptedResponse:
    """One scripted model answer.

    Attributes:
        text: The answer's text (streamed as text deltas, then stored).
        tool_calls: Tool calls the model asks for, in model order; empty for a final answer.
        gate: A gate name: the first model call that reaches ``stack.gate(session_id, gate)`` on one of
            ``gate_attempts`` waits there until the test releases it; later calls pass.
        gate_attempts: The attempts that stop at ``gate``.
        fail_attempts: Attempts on which the model call raises ``failure_type``; ``(1, 2, 3)`` fails the
            turn after ``RunModel``'s three attempts.
        failure_type: The built-in exception a failing attempt raises: ``"RuntimeError"``,
            ``"ValueError"``, ``"TypeError"`` or ``"ConnectionError"``.
        block_until_cancelled: The call never answers: on every attempt it waits (after its gate, if any)
            until its coroutine is cancelled, as ``cancel_turn`` does, or its Worker dies. A cancelled
            call, here or at a gate, is logged as a ``"model_cancelled"`` invocation.
        thread_text: Text :class:`ScriptedRunner` streams from another thread before it answers.
        late_text: Text :class:`ScriptedRunner` tries to stream shortly after its call returned (the
            session must drop it).
        partial_text: Text streamed on every attempt before the gate and the failure, so a failed attempt
            leaves partial output on the event stream.
        turn_error: Ends the turn as failed without a retry (``TurnCompleted.turn_error``); runners that
            support it, such as :class:`ScriptedRunner`, honour it.
        run_state_padding: Extra bytes in the framework run state (:class:`ScriptedRunner` only), for
            oversized-run-state tests.
        input_tokens: The usage this call reports.
        output_tokens: The usage this call reports.
        provider_faults: How the scripted provider server answers this call's HTTP requests on chosen
            attempts (the first that applies to a request wins); ignored by in-process scripted models.
    """

    text: str = ""
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    gate: str | None = None
    gate_attempts: tuple[int, ...] = (1,)
    fail_attempts: tuple[int, ...] = ()
    turn_error: str | None = None
    run_state_padding: int = 0
    input_tokens: int = 10
    output_tokens: int = 5
    partial_text: str = ""
    failure_type: str = "RuntimeError"
    thread_text: str = ""
    late_text: str = ""
    block_until_cancelled: bool = False
    provider_faults: tuple[ProviderFault, ...] = ()

    def __post_init__(self) -> None:
        if self.failure_type not in _FAILURE_TYPES:
            raise ValueError(f"failure_type must be one of {sorted(_FAILURE_TYPES)}")


_FAILURE_TYPES: dict[str, type[Exception]] = {
    "RuntimeError": RuntimeError,
    "ValueError": ValueError,
    "TypeError": TypeError,
    "ConnectionError": ConnectionError,
}


def _response_to_json(response: ScriptedResponse) -> dict[str, Any]:
    return {
        "text": response.text,
        "tool_calls": [
            {
                "tool_name": call.tool_name,
                "arguments": dict(call.arguments),
                "tool_call_id": call.tool_call_id,
                "gate": call.gate,
                "gate_attempts": list(call.gate_attempts),
                "fail_attempts": list(call.fail_attempts),
                "error": call.error,
                "output": call.output,
                "output_size": call.output_size,
                "asks": [asdict(question) for question in call.asks],
                "task": None if call.task is None else asdict(call.task),
            }
            for call in response.tool_calls
        ],
        "gate": response.gate,
        "gate_attempts": list(response.gate_attempts),
        "fail_attempts": list(response.fail_attempts),
        "turn_error": response.turn_error,
        "run_state_padding": response.run_state_padding,
        "input_tokens": response.input_tokens,
        "output_tokens": response.output_tokens,
        "partial_text": response.partial_text,
        "failure_type": response.failure_type,
        "thread_text": response.thread_text,
        "late_text": response.late_text,
        "block_until_cancelled": response.block_until_cancelled,
        "provider_faults": [asdict(fault) for fault in response.provider_faults],
    }


def _response_from_json(data: Mapping[str, Any]) -> ScriptedResponse:
    calls = tuple(
        ScriptedToolCall(
            tool_name=call["tool_name"],
            arguments=call["arguments"],
            tool_call_id=call["tool_call_id"],
            gate=call["gate"],
            gate_attempts=tuple(call["gate_attempts"]),
            fail_attempts=tuple(call["fail_attempts"]),
            error=call["error"],
            output=call["output"],
            output_size=call["output_size"],
            asks=tuple(
                question
                for question in (question_from_json(item) for item in call.get("asks", ()))
                if question is not None
            ),
            task=task_from_json(call.get("task")),
        )
        for call in data["tool_calls"]
    )
    return ScriptedResponse(
        text=data["text"],
        tool_calls=calls,
        gate=data["gate"],
        gate_attempts=tuple(data["gate_attempts"]),
        fail_attempts=tuple(data["fail_attempts"]),
        turn_error=data["turn_error"],
        run_state_padding=data["run_state_padding"],
        input_tokens=data["input_tokens"],
        output_tokens=data["output_tokens"],
        partial_text=data["partial_text"],
        failure_type=data.get("failure_type", "RuntimeError"),
        thread_text=data.get("thread_text", ""),
        late_text=data.get("late_text", ""),
        block_until_cancelled=data.get("block_until_cancelled", False),
        provider_faults=tuple(_fault_from_json(fault) for fault in data.get("provider_faults", ())),
    )


class ScriptStore:
    """Per-session model scripts, gates and the invocation log in one state directory.

    The test process and the Worker children open the same directory: the test writes scripts and opens
    gates, the children read scripts, wait at gates and log every real call.

    Args:
        state_dir: The shared directory (the stack's ``tmp_path``).
        default_turns: The script of sessions that have none of their own.
    """

    def __init__(
        self, state_dir: Path | str, default_turns: Sequence[Sequence[ScriptedResponse]] | None = None
    ) -> None:
        self._state_dir = Path(state_dir)
        self._default_turns = [list(turn) for turn in default_turns] if default_turns is not None else None

    @classmethod
    def from_environment(
        cls, default_turns: Sequence[Sequence[ScriptedResponse]] | None = None
    ) -> ScriptStore:
        """Open the store a Worker child's stack named in ``DEX_AGENTS_TEST_STATE_DIR``.

        Args:
            default_turns: The script of sessions that have none of their own.

        Raises:
            RuntimeError: If the variable is not set.
        """
        state_dir = os.environ.get(STATE_DIR_ENV)
        if not state_dir:
            raise RuntimeError(f"{STATE_DIR_ENV} is not set; start Workers with AgentTestStack.start_worker")
        return cls(state_dir, default_turns)

    @property
    def state_dir(self) -> Path:
        """The shared directory."""
        return self._state_dir

    @property
    def invocations(self) -> InvocationLog:
        """The log of real model and tool calls."""
        return InvocationLog(self._state_dir / "invocations.jsonl")

    def gate(self, session_id: str, name: str) -> FileGate:
        """Return a session's gate (scripts name gates; sessions keep them apart).

        Args:
            session_id: The session ID.
            name: The gate's name in the script.

        Returns:
            The gate.
        """
        return FileGate(self._state_dir, f"{session_id}.{name}")

    def _path(self, session_id: str) -> Path:
        return self._state_dir / "scripts" / f"{session_id}.json"

    def _summaries_path(self, session_id: str) -> Path:
        return self._state_dir / "scripts" / f"{session_id}.summaries.json"

    def set_summaries(self, session_id: str, by_turn: Mapping[str, ScriptedResponse]) -> None:
        """Script a session's context summary calls, by the turn whose model call triggers the compaction.

        A summary call of a turn without an entry answers with a default text (see
        :meth:`summary_response`). A response's ``text`` is the summary; its gates, failures,
        ``block_until_cancelled`` and usage work as for model calls.

        Args:
            session_id: The session ID.
            by_turn: Responses by turn ID (``"turn-<n>"``).
        """
        path = self._summaries_path(session_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = json.dumps({turn_id: _response_to_json(response) for turn_id, response in by_turn.items()})
        temporary = path.with_suffix(".tmp")
        temporary.write_text(payload, encoding="utf-8")
        temporary.replace(path)

    def summary_response(self, session_id: str, turn_id: str) -> ScriptedResponse:
        """Return the scripted summary call of a turn, or a default one whose ``text`` is empty.

        Args:
            session_id: The session ID.
            turn_id: The turn whose model call triggered the compaction.

        Returns:
            The response; an empty ``text`` asks the runner for its default summary text.
        """
        path = self._summaries_path(session_id)
        if not path.exists():
            return ScriptedResponse()
        data = cast(dict[str, dict[str, Any]], json.loads(path.read_text(encoding="utf-8")))
        entry = data.get(turn_id)
        return ScriptedResponse() if entry is None else _response_from_json(entry)

    def set_turns(self, session_id: str, turns: Sequence[Sequence[ScriptedResponse]]) -> None:
        """Replace a session's whole script.

        Args:
            session_id: The session ID.
            turns: One list of responses per turn, ``turns[0]`` for ``turn-1``.
        """
        path = self._path(session_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = json.dumps([[_response_to_json(response) for response in turn] for turn in turns])
        temporary = path.with_suffix(".tmp")
        temporary.write_text(payload, encoding="utf-8")
        temporary.replace(path)  # atomic, so a Worker never reads half a script

    def add_turn(self, session_id: str, *responses: ScriptedResponse) -> int:
        """Append one turn's responses to a session's script.

        Args:
            session_id: The session ID.
            *responses: The turn's model answers in call order; the last one usually has no tool calls.

        Returns:
            The turn's number (``n`` in ``turn-<n>``).
        """
        turns = self.turns(session_id)
        turns.append(list(responses))
        self.set_turns(session_id, turns)
        return len(turns)

    def turns(self, session_id: str) -> list[list[ScriptedResponse]]:
        """Return a session's script.

        Args:
            session_id: The session ID.

        Returns:
            One list of responses per turn.
        """
        path = self._path(session_id)
        if not path.exists():
            return [list(turn) for turn in self._default_turns or ()]
        data = cast(list[list[dict[str, Any]]], json.loads(path.read_text(encoding="utf-8")))
        return [[_response_from_json(response) for response in turn] for turn in data]

    def tool_call(self, session_id: str, turn_id: str, tool_call_id: str) -> ScriptedToolCall | None:
        """Find a scripted tool call.

        Args:
            session_id: The session ID.
            turn_id: ``"turn-<n>"``.
            tool_call_id: The call's ID.

        Returns:
            The call, or ``None`` when the script has none with that ID in that turn.
        """
        try:
            responses = self._turn(session_id, turn_id)
        except LookupError:
            return None  # an unscripted call runs with the default behaviour
        for response in responses:
            for call in response.tool_calls:
                if call.tool_call_id == tool_call_id:
                    return call
        return None

    def _turn(self, session_id: str, turn_id: str) -> list[ScriptedResponse]:
        number = _turn_number(turn_id)
        turns = self.turns(session_id)
        if number < 1 or number > len(turns):
            raise LookupError(
                f"the script of session {session_id!r} has no {turn_id} (it has {len(turns)} turns)"
            )
        return turns[number - 1]

    def response_for(
        self, session_id: str, turn_id: str, recorded_tool_call_ids: frozenset[str]
    ) -> ScriptedResponse:
        """Return the response for the model call a turn is at.

        Args:
            session_id: The session ID.
            turn_id: ``"turn-<n>"``.
            recorded_tool_call_ids: Tool call IDs that already have records in this turn.

        Returns:
            The first response of the turn whose tool calls are not all recorded yet.

        Raises:
            LookupError: If the script has no response left for this model call.
        """
        responses = self._turn(session_id, turn_id)
        index = 0
        while (
            index < len(responses)
            and responses[index].tool_calls
            and all(call.tool_call_id in recorded_tool_call_ids for call in responses[index].tool_calls)
        ):
            index += 1
        if index >= len(responses):
            raise LookupError(
                f"the script of session {session_id!r} has no response for model call {index + 1} "
                f"of {turn_id}"
            )
        return responses[index]


def _turn_number(turn_id: str) -> int:
    prefix, _, number = turn_id.partition("-")
    if prefix != "turn" or not number.isdigit():
        raise ValueError(f"unexpected turn ID {turn_id!r}")
    return int(number)


@dataclass(frozen=True)
class ModelCallScope:
    """The ``RunModel`` call a scripted model answers.

    Attributes:
        session_id: The session ID.
        turn_id: The turn.
        attempt: The ``RunModel`` attempt.
        step_execution_id: The ``RunModel`` execution.
        recorded_tool_call_ids: Tool call IDs with records in this turn.
        is_summary: The call is ``CompactContext``'s summary call (``turn_id`` is the turn that triggered
            it): :func:`scripted_model_response` answers it from the summary script.
    """

    session_id: str
    turn_id: str
    attempt: int
    step_execution_id: str
    recorded_tool_call_ids: frozenset[str] = field(default_factory=frozenset[str])
    is_summary: bool = False


_current_model_call: contextvars.ContextVar[ModelCallScope | None] = contextvars.ContextVar(
    "dex_agents_testing_model_call", default=None
)


_current_store: contextvars.ContextVar[ScriptStore | None] = contextvars.ContextVar(
    "dex_agents_testing_script_store", default=None
)


@contextmanager
def script_store_scope(store: ScriptStore) -> Iterator[ScriptStore]:
    """Make ``store`` the one scripted tools use when they are not given one.

    Args:
        store: The store (for example one with default turns).

    Yields:
        ``store``.
    """
    token = _current_store.set(store)
    try:
        yield store
    finally:
        _current_store.reset(token)


def current_model_call() -> ModelCallScope | None:
    """Return the ``RunModel`` call in progress in this task, if any."""
    return _current_model_call.get()


@contextmanager
def model_call_scope(scope: ModelCallScope) -> Iterator[ModelCallScope]:
    """Make ``scope`` the model call that :func:`scripted_model_response` answers.

    Args:
        scope: The call.

    Yields:
        ``scope``.
    """
    token = _current_model_call.set(scope)
    try:
        yield scope
    finally:
        _current_model_call.reset(token)


async def scripted_model_response(
    model_input: Sequence[str],
    store: ScriptStore | None = None,
    *,
    on_partial_text: Callable[[str], object] | None = None,
    offered_tools: Sequence[str] = (),
) -> ScriptedResponse:
    """Answer one model call from the session's script; call it from a scripted model.

    Inside a summary call's scope (``ModelCallScope.is_summary``, which
    :func:`with_model_call_scope` sets around ``summarize_context``) it answers from the summary script
    instead, as :func:`scripted_summary_response` does. It logs the call (session, turn, Step execution,
    attempt and ``model_input``) in the invocation log,
    waits at the response's gate on the listed attempts, waits until cancelled for a response that
    ``block_until_cancelled``, raises on the response's failing attempts, and returns the response, which
    the scripted model turns into its framework's answer. A cancellation while it waits (``cancel_turn``
    cancels the ``RunModel`` coroutine) is logged as a ``"model_cancelled"`` invocation and re-raised, so a
    test proves the model call stopped; an adapter's scripted model gets this by awaiting this function in
    the framework's own model call.

    Args:
        model_input: What the model sees, as texts (messages, tool results, rejection messages), so tests
            can assert on the model's actual input.
        store: The script store; by default the one named by ``DEX_AGENTS_TEST_STATE_DIR``.
        on_partial_text: Receives the response's ``partial_text`` before a gate or failure (pass the
            framework's streaming hook, or ``turn.events.write_text_delta``).
        offered_tools: The names of the tools the framework offers the model in this call, built-ins
            included; logged with the call, so tests check what the model was offered.

    Returns:
        The scripted response.

    Raises:
        RuntimeError: Outside a ``RunModel`` call, or on a scripted failing attempt.
    """
    scope = current_model_call()
    if scope is None:
        raise RuntimeError(
            "the scripted model ran outside RunModel; wrap the runner with with_model_call_scope() "
            "or use ScriptedRunner"
        )
    if scope.is_summary:
        return await scripted_summary_response(model_input, scope, store, on_partial_text=on_partial_text)
    store = store or ScriptStore.from_environment()
    response = store.response_for(scope.session_id, scope.turn_id, scope.recorded_tool_call_ids)
    return await _answer(
        store, _invocation("model", scope, model_input, offered_tools), response, on_partial_text
    )


async def scripted_summary_response(
    model_input: Sequence[str],
    scope: ModelCallScope,
    store: ScriptStore | None = None,
    *,
    on_partial_text: Callable[[str], object] | None = None,
) -> ScriptedResponse:
    """Answer one context summary call from the session's summary script (:meth:`ScriptStore.set_summaries`).

    It logs a ``"summary"`` invocation and otherwise behaves as :func:`scripted_model_response`: gates,
    failing attempts, ``block_until_cancelled``, and a ``"model_cancelled"`` entry when it is cancelled.

    Args:
        model_input: What the summary model sees, as texts.
        scope: The ``CompactContext`` call: session, triggering turn, attempt and Step execution.
        store: The script store; by default the one named by ``DEX_AGENTS_TEST_STATE_DIR``.
        on_partial_text: Receives the response's ``partial_text`` before a gate or failure.

    Returns:
        The scripted response; an empty ``text`` asks for the runner's default summary.

    Raises:
        RuntimeError: On a scripted failing attempt.
    """
    store = store or ScriptStore.from_environment()
    response = store.summary_response(scope.session_id, scope.turn_id)
    return await _answer(store, _invocation("summary", scope, model_input), response, on_partial_text)


#: A model input up to this size is logged whole; in a larger one (a session of megabytes) each long text
#: keeps its head and tail, so the log of a long session's model calls does not grow with its square.
LOGGED_MODEL_INPUT_BYTES = 1024 * 1024
_LOGGED_TEXT_END_BYTES = 2048


def _logged_text(text: str) -> str:
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) <= 2 * _LOGGED_TEXT_END_BYTES:
        return text
    head = data[:_LOGGED_TEXT_END_BYTES].decode("utf-8", errors="ignore")
    tail = data[-_LOGGED_TEXT_END_BYTES:].decode("utf-8", errors="ignore")
    return f"{head}{LOGGED_TEXT_CUT.format(size=len(data))}{tail}"


def logged_model_input(model_input: Sequence[str]) -> tuple[str, ...]:
    """Return a model input as the invocation log keeps it: whole up to `LOGGED_MODEL_INPUT_BYTES`.

    In a larger input each text longer than 4 KiB keeps its first and last 2 KiB around
    `LOGGED_TEXT_CUT`, which names the text's whole size in UTF-8 bytes.
    """
    texts = tuple(model_input)
    if sum(len(text) for text in texts) <= LOGGED_MODEL_INPUT_BYTES:
        return texts
    return tuple(_logged_text(text) for text in texts)


def _invocation(
    kind: InvocationKind, scope: ModelCallScope, model_input: Sequence[str], offered_tools: Sequence[str] = ()
) -> Invocation:
    return Invocation(
        kind=kind,
        session_id=scope.session_id,
        turn_id=scope.turn_id,
        attempt=scope.attempt,
        step_execution_id=scope.step_execution_id,
        model_input=logged_model_input(model_input),
        offered_tools=tuple(offered_tools),
    )


async def _answer(
    store: ScriptStore,
    call: Invocation,
    response: ScriptedResponse,
    on_partial_text: Callable[[str], object] | None,
) -> ScriptedResponse:
    """Log a scripted call, then wait, fail or answer as its response says."""
    store.invocations.record(call)
    if response.partial_text and on_partial_text is not None:
        on_partial_text(response.partial_text)
    try:
        if response.gate is not None and call.attempt in response.gate_attempts:
            await hold_first_arrival(store.gate(call.session_id, response.gate))
        if response.block_until_cancelled:
            await asyncio.get_running_loop().create_future()
    except asyncio.CancelledError:
        store.invocations.record(replace(call, kind="model_cancelled", model_input=(), offered_tools=()))
        raise
    if call.attempt in response.fail_attempts:
        raise _FAILURE_TYPES[response.failure_type](
            f"{SCRIPTED_MODEL_FAILURE} on attempt {call.attempt} of {call.turn_id}"
        )
    return response


def scripted_tool_output(
    call: ScriptedToolCall | None, tool_name: str, arguments: Mapping[str, object]
) -> str:
    """Return the result a scripted tool call produces.

    Args:
        call: The scripted call, if the script has one.
        tool_name: The tool.
        arguments: The arguments the tool received.

    Returns:
        ``call.output``, ``output_size`` bytes, or ``"<tool_name> done: <arguments JSON>"``.
    """
    if call is not None and call.output_size > 0:
        return "x" * call.output_size
    if call is not None and call.output is not None:
        return call.output
    return f"{tool_name} done: {json.dumps(dict(arguments), sort_keys=True, separators=(',', ':'))}"


async def run_scripted_tool(
    tool_name: str, arguments: Mapping[str, object], store: ScriptStore | None = None
) -> str:
    """Run one real scripted tool call; call it from a tool function.

    It must run inside ``execute_deferred_tool_call``: it reads the call through
    ``dex_agents.current_tool_execution()`` and refuses to run anywhere else (a tool run inside
    ``RunModel`` would break "one Step per tool call"). It asks the call's questions first (stopping the
    call until they are answered), then logs the run with its attempt and idempotency key, waits at the
    call's gate on the listed attempts, then fails, starts its task, or returns as the script says.

    Args:
        tool_name: The tool's name.
        arguments: The arguments the framework passed.
        store: The script store; by default the one of the enclosing :func:`script_store_scope`, else
            the one named by ``DEX_AGENTS_TEST_STATE_DIR``.

    Returns:
        The tool's result text.

    Raises:
        RuntimeError: Outside ``execute_deferred_tool_call``, or on a scripted failing attempt.
        ToolExecutionError: When the script gives the call an ``error``.
        ToolInputRequired: While a question of the call has no answer.
        ToolTaskRunning: Once the call's task started.
    """
    execution = current_tool_execution()
    if execution is None:
        raise RuntimeError(f"scripted tool {tool_name!r} ran outside execute_deferred_tool_call")
    store = store or _current_store.get() or ScriptStore.from_environment()
    record = execution.tool_call
    call = store.tool_call(execution.flow_id, record.turn_id, record.tool_call_id)
    answers = ask_scripted_questions(call, store, execution)
    store.invocations.record(
        Invocation(
            kind="tool",
            session_id=execution.flow_id,
            turn_id=record.turn_id,
            attempt=execution.attempt,
            tool_name=tool_name,
            tool_call_id=record.tool_call_id,
            idempotency_key=execution.idempotency_key,
        )
    )
    if call is not None:
        if call.gate is not None and execution.attempt in call.gate_attempts:
            await hold_first_arrival(store.gate(execution.flow_id, call.gate))
        if execution.attempt in call.fail_attempts:
            raise RuntimeError(
                f"{SCRIPTED_TOOL_FAILURE} on attempt {execution.attempt} of {record.tool_call_id}"
            )
        if call.error is not None:
            raise ToolExecutionError(call.error)
        if call.task is not None:
            await start_scripted_task(call, call.task, store)
    return scripted_tool_output(call, tool_name, arguments) + answers_suffix(answers)


async def run_inline_scripted_tool(
    tool_name: str, arguments: Mapping[str, object], store: ScriptStore | None = None
) -> str:
    """Run one scripted tool call that the framework runs inline inside ``RunModel``; call it from a tool.

    Some harnesses (the Claude Code CLI, for one) run read tools themselves in the middle of a model call,
    not in a tool Step of their own, so :func:`run_scripted_tool` does not apply. This finds the scripted
    call by tool name and arguments in the script of the current model call's turn (the first match), logs
    the run with the model call's attempt and Step execution (and the call's ID, or ``""`` for an
    unscripted call), waits at the call's gate on the listed attempts, and returns the scripted result.
    A call's ``fail_attempts`` and ``error`` do not apply to inline runs.

    Args:
        tool_name: The tool's name.
        arguments: The arguments the framework passed.
        store: The script store; by default the one of the enclosing :func:`script_store_scope`, else
            the one named by ``DEX_AGENTS_TEST_STATE_DIR``.

    Returns:
        The tool's result text.

    Raises:
        RuntimeError: Outside a ``RunModel`` call scope (see :func:`current_model_call`).
    """
    scope = current_model_call()
    if scope is None:
        raise RuntimeError(
            f"inline scripted tool {tool_name!r} ran outside a RunModel call scope; wrap the runner with "
            "with_model_call_scope(), or use run_scripted_tool() inside execute_deferred_tool_call"
        )
    store = store or _current_store.get() or ScriptStore.from_environment()
    call = _inline_tool_call(store, scope, tool_name, arguments)
    store.invocations.record(
        Invocation(
            kind="tool",
            session_id=scope.session_id,
            turn_id=scope.turn_id,
            attempt=scope.attempt,
            step_execution_id=scope.step_execution_id,
            tool_name=tool_name,
            tool_call_id=call.tool_call_id if call is not None else "",
        )
    )
    if call is not None and call.gate is not None and scope.attempt in call.gate_attempts:
        await hold_first_arrival(store.gate(scope.session_id, call.gate))
    return scripted_tool_output(call, tool_name, arguments)


def _inline_tool_call(
    store: ScriptStore, scope: ModelCallScope, tool_name: str, arguments: Mapping[str, object]
) -> ScriptedToolCall | None:
    number = _turn_number(scope.turn_id)
    turns = store.turns(scope.session_id)
    if not 1 <= number <= len(turns):
        return None  # an unscripted call runs with the default behaviour
    for response in turns[number - 1]:
        for call in response.tool_calls:
            if call.tool_name == tool_name and dict(call.arguments) == dict(arguments):
                return call
    return None
