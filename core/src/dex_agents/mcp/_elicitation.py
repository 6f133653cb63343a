"""An MCP elicitation as a session question, and the user's text answer as the elicitation's result.

A session question has one text answer, optionally from a list of choices. An elicitation maps onto it so:

- **URL mode**: the question carries the message and the URL; the choices are ``done`` (the user finished at
  the URL: ``accept``), ``decline`` and ``cancel``.
- **Form mode, one field** of text, number, enum or boolean: the answer is the field's value (an enum's
  values, or ``yes``/``no``, are the choices).
- **Form mode, anything else**: the question lists the fields, and the answer is a JSON object of them.

A form answer is checked against the requested schema (types, required fields, lengths, bounds, formats,
enum values, list sizes) before anything is sent; a missing optional field with a default takes the
default, as a form pre-filled with it would. ``decline`` and ``cancel`` are offered as answers where the
server should hear them (`AnswerActions.OFFERED`); a form of a field type outside the MCP elicitation schema
cannot be asked at all (`read_elicitation` returns `None`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal, cast
from urllib.parse import urlsplit

from dex_agents._tools._arguments import JsonNestingError, load_json
from dex_agents._tools._outcomes import ToolInputRequested
from dex_agents.limits import MAX_QUESTION_BYTES, bounded_text, utf8_size
from dex_agents.values import QuestionAnswer, QuestionResolution

__all__ = [
    "ACCEPT_URL_ANSWER",
    "CANCEL_ANSWER",
    "DECLINE_ANSWER",
    "ElicitationAnswerError",
    "ElicitationQuestion",
    "elicitation_fingerprint",
    "read_elicitation",
]

ACCEPT_URL_ANSWER = "done"
"""The answer to a URL elicitation that says the user finished what the URL asked."""
DECLINE_ANSWER = "decline"
"""The answer that sends the server ``decline``."""
CANCEL_ANSWER = "cancel"
"""The answer that sends the server ``cancel``."""

_BOOLEAN_CHOICES = ("yes", "no")
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_FORMAT_NAMES = {
    "email": "an email address",
    "uri": "a URI",
    "date": "a date YYYY-MM-DD",
    "date-time": "a date and time (ISO 8601)",
}
FieldKind = Literal["string", "number", "integer", "boolean", "enum", "enum_list"]


class ElicitationAnswerError(ValueError):
    """The user's answer does not fit the elicitation; the message says why, for the user."""


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def elicitation_fingerprint(params: Mapping[str, Any]) -> str:
    """Return the SHA-256 of what an elicitation asks: its mode, message, and schema or URL.

    A URL elicitation's ``elicitationId`` is left out: a server mints a new one each time it asks, and the
    same question asked again must be recognised as the same.
    """
    asked = {key: params.get(key) for key in ("mode", "message", "requestedSchema", "url")}
    asked["mode"] = asked["mode"] or "form"
    return hashlib.sha256(_canonical(asked).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class _Field:
    name: str
    kind: FieldKind
    schema: Mapping[str, Any]
    required: bool
    choices: tuple[str, ...] = ()
    labels: tuple[str | None, ...] = ()

    @property
    def has_default(self) -> bool:
        return "default" in self.schema


def _options(schema: Mapping[str, Any]) -> tuple[tuple[str, ...], tuple[str | None, ...]] | None:
    """An enum's values and titles: ``enum`` (with legacy ``enumNames``), or ``oneOf``/``anyOf`` consts."""
    values: object = schema.get("enum")
    labels: list[str | None] = []
    if values is not None:
        names: object = schema.get("enumNames")
        if (
            isinstance(values, list)
            and isinstance(names, list)
            and len(cast(list[object], names)) == len(cast(list[object], values))
        ):
            labels = [name if isinstance(name, str) else None for name in cast(list[object], names)]
    else:
        options: object = schema.get("oneOf", schema.get("anyOf"))
        if not isinstance(options, list):
            return None
        values = []
        for option in cast(list[object], options):
            if not isinstance(option, dict):
                return None
            option = cast(dict[str, Any], option)
            cast(list[object], values).append(option.get("const"))
            title: object = option.get("title")
            labels.append(title if isinstance(title, str) else None)
    if not isinstance(values, list) or not values:
        return None
    texts = [value for value in cast(list[object], values) if isinstance(value, str) and value.strip()]
    if len(texts) != len(cast(list[object], values)) or len(set(texts)) != len(texts):
        return None
    return tuple(texts), tuple(labels) if labels else (None,) * len(texts)


def _read_field(name: str, schema: object, required: bool) -> _Field | None:
    if not isinstance(schema, dict):
        return None
    schema = cast(dict[str, Any], schema)
    kind: object = schema.get("type")
    if kind == "array":
        items: object = schema.get("items")
        found = _options(cast(dict[str, Any], items)) if isinstance(items, dict) else None
        return None if found is None else _Field(name, "enum_list", schema, required, *found)
    if any(key in schema for key in ("enum", "oneOf", "anyOf")):
        found = _options(schema)
        return (
            None
            if found is None or kind not in (None, "string")
            else _Field(name, "enum", schema, required, *found)
        )
    if kind in ("string", "number", "integer", "boolean"):
        if kind == "string" and schema.get("format") not in (None, *_FORMAT_NAMES):
            return None  # a format the answer could not be checked against
        return _Field(name, cast(FieldKind, kind), schema, required)
    return None


def _describe(field: _Field) -> str:
    schema = field.schema
    parts: list[str] = []
    if field.kind == "string":
        text = "text"
        if schema.get("format"):
            text += f", {_FORMAT_NAMES[schema['format']]}"
        low, high = schema.get("minLength"), schema.get("maxLength")
        if low is not None and high is not None:
            text += f", {low} to {high} characters"
        elif low is not None:
            text += f", at least {low} characters"
        elif high is not None:
            text += f", at most {high} characters"
        parts.append(text)
    elif field.kind in ("number", "integer"):
        text = "an integer" if field.kind == "integer" else "a number"
        low, high = schema.get("minimum"), schema.get("maximum")
        if low is not None and high is not None:
            text += f" from {low} to {high}"
        elif low is not None:
            text += f" of at least {low}"
        elif high is not None:
            text += f" of at most {high}"
        parts.append(text)
    elif field.kind == "boolean":
        parts.append("true or false")
    else:
        named = ", ".join(
            _canonical(value) + (f" ({label})" if label else "")
            for value, label in zip(field.choices, field.labels, strict=True)
        )
        if field.kind == "enum":
            parts.append(f"one of {named}")
        else:
            low, high = schema.get("minItems"), schema.get("maxItems")
            size = f"{low or 0} to {high}" if high is not None else f"at least {low or 0}"
            parts.append(f"a list of {size} of {named}")
    if field.has_default:
        parts.append(f"default {_canonical(schema['default'])}")
    line = f"- {field.name}{'*' if field.required else ''} ({'; '.join(parts)})"
    about: object = schema.get("description") or schema.get("title")
    return f"{line}: {about}" if isinstance(about, str) and about.strip() else line


def _number(value: object, field: _Field, what: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ElicitationAnswerError(
            f"{what} must be {'an integer' if field.kind == 'integer' else 'a number'}"
        )
    if field.kind == "integer":
        if isinstance(value, float) and not value.is_integer():
            raise ElicitationAnswerError(f"{what} must be an integer")
        value = int(value)
    low, high = field.schema.get("minimum"), field.schema.get("maximum")
    if isinstance(low, int | float) and value < low:
        raise ElicitationAnswerError(f"{what} must be at least {low}")
    if isinstance(high, int | float) and value > high:
        raise ElicitationAnswerError(f"{what} must be at most {high}")
    return value


def _string(value: object, field: _Field, what: str) -> str:
    if not isinstance(value, str):
        raise ElicitationAnswerError(f"{what} must be text")
    low, high = field.schema.get("minLength"), field.schema.get("maxLength")
    if isinstance(low, int) and len(value) < low:
        raise ElicitationAnswerError(f"{what} must be at least {low} characters")
    if isinstance(high, int) and len(value) > high:
        raise ElicitationAnswerError(f"{what} must be at most {high} characters")
    form: object = field.schema.get("format")
    valid = True
    if form == "email":
        valid = _EMAIL.match(value) is not None
    elif form == "uri":
        parts = urlsplit(value)
        valid = bool(parts.scheme) and bool(parts.netloc or parts.path)
    elif form == "date":
        try:
            date.fromisoformat(value)
        except ValueError:
            valid = False
    elif form == "date-time":
        try:
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            valid = False
    if not valid:
        raise ElicitationAnswerError(f"{what} must be {_FORMAT_NAMES[cast(str, form)]}")
    return value


def _check_value(field: _Field, value: object) -> object:
    what = f"field {field.name!r}"
    if field.kind == "boolean":
        if not isinstance(value, bool):
            raise ElicitationAnswerError(f"{what} must be true or false")
        return value
    if field.kind in ("number", "integer"):
        return _number(value, field, what)
    if field.kind == "string":
        return _string(value, field, what)
    if field.kind == "enum":
        if value not in field.choices:
            raise ElicitationAnswerError(f"{what} must be one of {', '.join(map(_canonical, field.choices))}")
        return value
    if not isinstance(value, list) or any(item not in field.choices for item in cast(list[object], value)):
        raise ElicitationAnswerError(f"{what} must be a list of {', '.join(map(_canonical, field.choices))}")
    items = cast(list[object], value)
    if len(set(cast(list[str], items))) != len(items):
        raise ElicitationAnswerError(f"{what} must not name a value twice")
    low, high = field.schema.get("minItems"), field.schema.get("maxItems")
    if isinstance(low, int) and len(items) < low:
        raise ElicitationAnswerError(f"{what} must list at least {low} values")
    if isinstance(high, int) and len(items) > high:
        raise ElicitationAnswerError(f"{what} must list at most {high} values")
    return items


@dataclass(frozen=True)
class ElicitationQuestion:
    """One elicitation, as the session asks it and as the answer goes back.

    Attributes:
        mode: ``form`` or ``url``.
        message: The server's message.
        fingerprint: `elicitation_fingerprint` of the request.
        url: The URL of a URL elicitation.
        fields: A form's fields, in the server's order.
        offers_actions: Whether ``decline`` and ``cancel`` are answers: only where the server would not hear
            a declined question otherwise.
    """

    mode: Literal["form", "url"]
    message: str
    fingerprint: str
    url: str | None
    fields: tuple[_Field, ...]
    offers_actions: bool

    @property
    def _single(self) -> _Field | None:
        if len(self.fields) == 1 and self.fields[0].kind != "enum_list":
            return self.fields[0]
        return None

    def _own_choices(self) -> tuple[str, ...]:
        """The choices the request itself implies, before ``decline`` and ``cancel``."""
        if self.mode == "url":
            return (ACCEPT_URL_ANSWER,)
        single = self._single
        if single is not None and single.kind == "enum":
            return single.choices
        if single is not None and single.kind == "boolean":
            return _BOOLEAN_CHOICES
        return ()

    def _actions(self) -> tuple[str, ...]:
        """``decline`` and ``cancel`` where offered, except one the request already uses as a choice."""
        if not self.offers_actions:
            return ()
        taken = self._own_choices()
        return tuple(action for action in (DECLINE_ANSWER, CANCEL_ANSWER) if action not in taken)

    def _text_and_choices(self) -> tuple[str, tuple[str, ...], bool]:
        actions = " Answer decline or cancel to tell the server so." if self._actions() else ""
        choices = (*self._own_choices(), *self._actions())
        if self.mode == "url":
            text = (
                f"{self.message}\n\nOpen this URL: {self.url}\n"
                f"Answer {ACCEPT_URL_ANSWER} once you finished there.{actions}"
            )
            return text, choices, False
        single = self._single
        if single is not None and single.kind in ("enum", "boolean"):
            return self.message, choices, False
        if single is not None:
            plain = single.kind == "string" and not single.schema.get("format")
            return self.message if plain else f"{self.message}\n\n{_describe(single)}", choices, True
        described = "\n".join(_describe(field) for field in self.fields)
        text = (
            f"{self.message}\n\nAnswer with a JSON object of these fields (* marks a required one):\n"
            f"{described}\nA field you leave out takes its default.{actions}"
        )
        return text, choices, True

    def to_input_request(self, continuation: str, problem: str | None = None) -> ToolInputRequested:
        """Return the question for the session, carrying ``continuation``.

        Args:
            continuation: What the next run reads back.
            problem: Why the last answer was not accepted, put before the question.

        Raises:
            ValueError: If the question is too long for the session even without its field descriptions.
        """
        text, choices, free_text = self._text_and_choices()
        if problem is not None:
            text = f"{bounded_text(f'Your last answer was not accepted: {problem}.', 2048)}\n\n{text}"
        if utf8_size(text) > MAX_QUESTION_BYTES:
            text = bounded_text(text, MAX_QUESTION_BYTES)
        return ToolInputRequested(text, choices, allows_free_text=free_text, continuation=continuation)

    def result(self, answer: QuestionAnswer) -> dict[str, Any]:
        """Return the elicitation result (``action`` and ``content``) the answer stands for.

        A declined question is ``decline`` and a passed deadline ``cancel``; so are the answers ``decline``
        and ``cancel`` where they are offered.

        Raises:
            ElicitationAnswerError: The answer does not fit the form.
        """
        if answer.resolution is QuestionResolution.DECLINED:
            return {"action": "decline"}
        if answer.resolution is QuestionResolution.DEADLINE_PASSED:
            return {"action": "cancel"}
        text = answer.answer.strip()
        if text.lower() in self._actions():
            return {"action": text.lower()}
        if self.mode == "url":
            if text.lower() != ACCEPT_URL_ANSWER:
                raise ElicitationAnswerError(
                    f"answer {ACCEPT_URL_ANSWER}, {DECLINE_ANSWER} or {CANCEL_ANSWER}"
                )
            return {"action": "accept"}
        return {"action": "accept", "content": self._content(answer.answer)}

    def _content(self, answer: str) -> dict[str, Any]:
        single = self._single
        if single is not None:
            return {single.name: self._single_value(single, answer)}
        try:
            value: object = load_json(answer)
        except JsonNestingError as error:
            raise ElicitationAnswerError(f"the answer's {error}") from None
        except ValueError:
            raise ElicitationAnswerError("the answer must be a JSON object of the fields listed") from None
        if not isinstance(value, dict):
            raise ElicitationAnswerError("the answer must be a JSON object of the fields listed")
        given = cast(dict[str, Any], value)
        by_name = {field.name: field for field in self.fields}
        unknown = sorted(set(given) - set(by_name))
        if unknown:
            raise ElicitationAnswerError(f"the form has no field {', '.join(map(repr, unknown))}")
        content: dict[str, Any] = {}
        for field in self.fields:
            if field.name in given:
                content[field.name] = _check_value(field, given[field.name])
            elif field.has_default:
                content[field.name] = field.schema["default"]
            elif field.required:
                raise ElicitationAnswerError(f"field {field.name!r} is required")
        return content

    @staticmethod
    def _single_value(field: _Field, answer: str) -> object:
        text = answer.strip()
        if field.kind == "boolean":
            if text.lower() not in _BOOLEAN_CHOICES:
                raise ElicitationAnswerError("answer yes or no")
            return text.lower() == "yes"
        if field.kind in ("number", "integer"):
            try:
                number: object = load_json(text)
            except ValueError:
                number = None
            return _check_value(field, number)
        return _check_value(field, answer if field.kind == "string" else text)


def read_elicitation(params: Mapping[str, Any], *, offers_actions: bool) -> ElicitationQuestion | None:
    """Return an ``elicitation/create`` request's parameters as a question, or `None` if it cannot be asked.

    Args:
        params: The request's ``params`` as JSON.
        offers_actions: Whether ``decline`` and ``cancel`` are offered as answers.

    Returns:
        The question; `None` for a blank message, a URL elicitation without an ``http(s)`` URL, or a form
        with a field outside the MCP elicitation schema or with no field at all.
    """
    message: object = params.get("message")
    mode: object = params.get("mode", "form")
    if not isinstance(message, str) or not message.strip():
        return None
    fingerprint = elicitation_fingerprint(params)
    if mode == "url":
        url: object = params.get("url")
        if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https"):
            return None
        question = ElicitationQuestion("url", message, fingerprint, url, (), offers_actions)
    elif mode == "form":
        schema: object = params.get("requestedSchema")
        if not isinstance(schema, dict):
            return None
        schema = cast(dict[str, Any], schema)
        properties: object = schema.get("properties")
        if not isinstance(properties, dict) or not properties:
            return None
        raw_required: object = schema.get("required", [])
        required = set(cast(list[str], raw_required)) if isinstance(raw_required, list) else set[str]()
        fields: list[_Field] = []
        for name, field_schema in cast(dict[str, Any], properties).items():
            field = _read_field(name, field_schema, name in required)
            if field is None:
                return None
            fields.append(field)
        question = ElicitationQuestion("form", message, fingerprint, None, tuple(fields), offers_actions)
    else:
        return None
    try:
        question.to_input_request("")
    except (TypeError, ValueError):
        return None  # choices the session refuses, such as more than it offers
    return question
