"""Reading browser requests: bounded JSON bodies, checked fields, and errors as clear 4xx answers."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any, NoReturn, cast

from starlette.requests import Request
from starlette.responses import JSONResponse

__all__ = [
    "DEFAULT_MAX_JSON_DEPTH",
    "DEFAULT_MAX_REQUEST_BYTES",
    "BadRequestError",
    "checked_id",
    "error_response",
    "fail",
    "int_field",
    "new_request_id",
    "optional_bool_field",
    "optional_text_field",
    "read_json_object",
    "text_field",
]

#: The largest request body the app reads: a largest user message (256 KiB) as JSON, with room to spare.
DEFAULT_MAX_REQUEST_BYTES = 1024 * 1024

#: The deepest nesting of arrays and objects a request body may have: far more than any route reads.
DEFAULT_MAX_JSON_DEPTH = 64

_MAX_ID_CHARS = 512
_SURROGATE = re.compile("[\ud800-\udfff]")
_PRINTABLE = re.compile(r"[\x21-\x7e]+")


class BadRequestError(Exception):
    """A request the app refuses, with its HTTP status and a message that names the problem.

    A server-side failure (5xx) carries a ``request_id`` instead of its details: the details go to the log
    under that ID, so the browser learns nothing of the engine behind the app.
    """

    def __init__(self, status_code: int, message: str, request_id: str | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.request_id = request_id


def fail(status_code: int, message: str) -> NoReturn:
    """Refuse the request with ``status_code`` and ``message``."""
    raise BadRequestError(status_code, message)


def error_response(status_code: int, message: str, request_id: str | None = None) -> JSONResponse:
    """The JSON answer to a refused request: ``{"error": message}``, plus ``request_id`` when given."""
    body = {"error": message} if request_id is None else {"error": message, "request_id": request_id}
    headers = None if request_id is None else {"x-request-id": request_id}
    return JSONResponse(body, status_code=status_code, headers=headers)


def new_request_id() -> str:
    """A fresh ID that names one failed request in the answer and in the log."""
    return uuid.uuid4().hex


async def read_json_object(
    request: Request, max_bytes: int, max_depth: int = DEFAULT_MAX_JSON_DEPTH
) -> dict[str, Any]:
    """Read the body as one JSON object, refusing it before reading past ``max_bytes``.

    Only ``application/json`` is accepted: a cross-site HTML form cannot send it without the browser asking
    the server first, so the write endpoints cannot be driven by a form on another site.

    Raises:
        BadRequestError: 415 for another content type, 413 for a body over the limit, 400 for a body that
            is not a JSON object, nests deeper than ``max_depth``, or holds text that is not valid Unicode
            (a lone surrogate, which no session can store).
    """
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        fail(415, f"the request body must be application/json, got {content_type or 'no content type'}")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes:
        fail(413, f"the request body is {declared} bytes, more than the {max_bytes}-byte limit")
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > max_bytes:
            fail(413, f"the request body is more than the {max_bytes}-byte limit")
    try:
        value = json.loads(bytes(body))
    except RecursionError:
        fail(400, f"the request body nests arrays and objects more than {max_depth} deep")
    except ValueError as error:
        fail(400, f"the request body is not JSON: {error}")
    if not isinstance(value, dict):
        fail(400, f"the request body must be a JSON object, got {type(value).__name__}")
    checked = cast(dict[str, Any], value)
    _check_json_value(checked, max_depth)
    return checked


def _check_json_value(value: object, max_depth: int) -> None:
    """Refuse nesting deeper than ``max_depth`` and strings with lone surrogates, without recursion."""
    pending: list[tuple[object, int]] = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, str):
            if match := _SURROGATE.search(item):
                fail(
                    400,
                    f"the request body holds text that is not valid Unicode: a lone surrogate "
                    f"(U+{ord(match.group()):04X}) at character {match.start()} of a string",
                )
            continue
        if isinstance(item, dict | list):
            if depth > max_depth:
                fail(400, f"the request body nests arrays and objects more than {max_depth} deep")
            if isinstance(item, dict):
                for key, member in cast(dict[str, object], item).items():
                    pending.append((key, depth))
                    pending.append((member, depth + 1))
            else:
                pending.extend((member, depth + 1) for member in cast(list[object], item))


def checked_id(value: str, what: str) -> str:
    """Return an ID from a path or a body when it is 1-512 printable ASCII characters without spaces.

    Raises:
        BadRequestError: 400 naming ``what`` otherwise.
    """
    if not value or len(value) > _MAX_ID_CHARS or not _PRINTABLE.fullmatch(value):
        fail(400, f"{what} must be 1-{_MAX_ID_CHARS} printable characters without spaces")
    return value


def text_field(body: dict[str, Any], name: str) -> str:
    """Return the string field ``name``.

    Raises:
        BadRequestError: 400 when it is missing or not a string, 422 when it is blank.
    """
    value = body.get(name)
    if not isinstance(value, str):
        fail(400, f"the field {name!r} must be a string")
    if not value.strip():
        fail(422, f"the field {name!r} must not be blank")
    return value


def int_field(body: dict[str, Any], name: str) -> int:
    """Return the integer field ``name``.

    Raises:
        BadRequestError: 400 when it is missing or not an integer.
    """
    value = body.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        fail(400, f"the field {name!r} must be an integer")
    return value


def optional_text_field(body: dict[str, Any], name: str) -> str | None:
    """Return the string field ``name``, or ``None`` when it is missing, null or blank.

    Raises:
        BadRequestError: 400 when it is present and not a string.
    """
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        fail(400, f"the field {name!r} must be a string or null")
    return value if value.strip() else None


def optional_bool_field(body: dict[str, Any], name: str) -> bool:
    """Return the boolean field ``name``; missing or null is `False`.

    Raises:
        BadRequestError: 400 when it is present and not a boolean.
    """
    value = body.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        fail(400, f"the field {name!r} must be true, false or null")
    return value
