"""A task's input request as a session question, and the user's answer as the task's input response.

The session can ask the user one question with one text answer, so it takes exactly one kind of request:
a form elicitation (``elicitation/create``) whose form has a single string, enum or boolean field. Anything
else (several requests at once, sampling, roots, a URL elicitation, a form of several or other fields) is
described instead, so the call can fail with a message that names what the tool wanted.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from dex_agents._tools._outcomes import ToolInputRequested
from dex_agents.values import QuestionAnswer, QuestionResolution

__all__ = [
    "TaskQuestion",
    "describe_input_requests",
    "input_response",
    "read_task_question",
    "request_fingerprint",
]

_ELICITATION = "elicitation/create"
_BOOLEAN_CHOICES = ("yes", "no")
FieldKind = Literal["string", "enum", "boolean"]


def _fingerprint(request: Mapping[str, Any]) -> str:
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class TaskQuestion:
    """One form elicitation of a task, as the session asks it.

    Attributes:
        key: The request's key in the task's ``inputRequests``.
        fingerprint: The SHA-256 of the request's canonical JSON.
        question: The elicitation's message.
        field: The form's one field.
        kind: ``string`` (free text), ``enum`` (one of ``choices``) or ``boolean`` (``yes`` or ``no``).
        choices: The answers offered; empty for free text.
    """

    key: str
    fingerprint: str
    question: str
    field: str
    kind: FieldKind
    choices: tuple[str, ...] = ()

    def to_input_request(self, continuation: str) -> ToolInputRequested:
        """Return the question for the session, carrying ``continuation``."""
        return ToolInputRequested(
            self.question,
            self.choices,
            allows_free_text=self.kind == "string",
            continuation=continuation,
        )


def _enum_values(schema: Mapping[str, Any]) -> tuple[str, ...] | None:
    values: object = schema.get("enum")
    if values is None:
        # A titled enum lists its values as {"const": ..., "title": ...} options.
        options: object = schema.get("oneOf", schema.get("anyOf"))
        if not isinstance(options, list):
            return None
        values = [
            cast(dict[str, Any], option).get("const")
            for option in cast(list[object], options)
            if isinstance(option, dict)
        ]
    if not isinstance(values, list) or not values:
        return None
    texts = [value for value in cast(list[object], values) if isinstance(value, str) and value.strip()]
    if len(texts) != len(cast(list[object], values)) or len(set(texts)) != len(texts):
        return None
    return tuple(texts)


def _field(schema: Mapping[str, Any]) -> tuple[str, FieldKind, tuple[str, ...]] | None:
    properties: object = schema.get("properties")
    if not isinstance(properties, dict) or len(cast(dict[str, Any], properties)) != 1:
        return None
    [(name, field)] = cast(dict[str, Any], properties).items()
    if not isinstance(field, dict):
        return None
    field = cast(dict[str, Any], field)
    if any(key in field for key in ("enum", "oneOf", "anyOf")):
        # Choices the session cannot offer one by one must not turn into free text.
        enum = _enum_values(field)
        return None if enum is None else (name, "enum", enum)
    if field.get("type") == "boolean":
        return name, "boolean", _BOOLEAN_CHOICES
    if field.get("type") == "string" and "format" not in field:
        return name, "string", ()
    return None


def read_task_question(input_requests: Mapping[str, Mapping[str, Any]]) -> TaskQuestion | None:
    """Return the task's one request as a question, or `None` when the session cannot ask it.

    Args:
        input_requests: The task's outstanding requests by key.

    Returns:
        The question, when there is exactly one request and it is a form elicitation with a single string,
        enum or boolean field and a message the session accepts as a question.
    """
    if len(input_requests) != 1:
        return None
    [(key, request)] = input_requests.items()
    params: object = request.get("params")
    if request.get("method") != _ELICITATION or not isinstance(params, dict):
        return None
    params = cast(dict[str, Any], params)
    message: object = params.get("message")
    schema: object = params.get("requestedSchema")
    if params.get("mode", "form") != "form" or not isinstance(message, str) or not isinstance(schema, dict):
        return None
    field = _field(cast(dict[str, Any], schema))
    if field is None:
        return None
    name, kind, choices = field
    question = TaskQuestion(key, _fingerprint(request), message, name, kind, choices)
    try:
        question.to_input_request("")
    except (TypeError, ValueError):
        return None  # a blank or oversized message, or choices the session refuses
    return question


def request_fingerprint(input_requests: Mapping[str, Mapping[str, Any]], key: str) -> str | None:
    """Return the fingerprint of the request under ``key``, or `None` when the task does not list it."""
    request = input_requests.get(key)
    return None if request is None else _fingerprint(request)


def describe_input_requests(input_requests: Mapping[str, Mapping[str, Any]]) -> str:
    """Name each request, its kind and its message, for an error the model reads."""
    described: list[str] = []
    for key, request in input_requests.items():
        method: object = request.get("method")
        params: object = request.get("params")
        message = cast(dict[str, Any], params).get("message") if isinstance(params, dict) else None
        kind = method if isinstance(method, str) else "an unknown request"
        described.append(f"{key} ({kind}: {message!r})" if isinstance(message, str) else f"{key} ({kind})")
    return ", ".join(described) or "no request named"


def input_response(question: TaskQuestion, resolution: QuestionAnswer) -> dict[str, Any]:
    """Return the elicitation result that tells the task how its question ended.

    An answer accepts the form with the answer as the field's value (``true`` or ``false`` for a boolean),
    a decline declines it, and a passed deadline cancels it, as a user who dismissed the form.
    """
    if resolution.resolution is QuestionResolution.DECLINED:
        return {"action": "decline"}
    if resolution.resolution is QuestionResolution.DEADLINE_PASSED:
        return {"action": "cancel"}
    value: str | bool = resolution.answer
    if question.kind == "boolean":
        value = resolution.answer.strip().lower() == "yes"
    return {"action": "accept", "content": {question.field: value}}
