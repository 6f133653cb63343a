"""The session's built-in tools: their definitions for the model, and the checks on their arguments.

``ask_user`` asks the user a question and waits for the answer, ``durable_wait`` waits on a durable Timer
("check again tomorrow"), and ``write_todos`` writes the session's plan. A session enables them with
`AgentSessionOptions.built_in_tools`; a runner offers the enabled ones (`AgentTurnContext
.enabled_built_in_tools`) to its model like any other tool, and the session, not the runner, carries out
their calls: `RunModel` routes each one to its own Step, or settles it in its own commit.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from types import MappingProxyType
from typing import Any, cast

from dex_agents._tools._arguments import parse_tool_arguments
from dex_agents._tools._outcomes import check_question
from dex_agents.limits import MAX_PLAN_TASK_BYTES, MAX_PLAN_TASKS, utf8_size
from dex_agents.runner import ToolExecutionError
from dex_agents.values import AgentPlanTask, PlanTaskStatus

__all__ = [
    "ASK_USER",
    "BUILT_IN_TOOL_DEFINITIONS",
    "BUILT_IN_TOOL_NAMES",
    "DURABLE_WAIT",
    "WRITE_TODOS",
    "AskUserArguments",
    "BuiltInArgumentError",
    "BuiltInToolDefinition",
    "DurableWaitArguments",
    "parse_ask_user_arguments",
    "parse_durable_wait_arguments",
    "parse_write_todos_arguments",
]

ASK_USER = "ask_user"
"""The built-in tool that asks the user a question."""
DURABLE_WAIT = "durable_wait"
"""The built-in tool that waits on a durable Timer."""
WRITE_TODOS = "write_todos"
"""The built-in tool that writes the session's plan."""

#: The built-in tool names, in the order runners offer them.
BUILT_IN_TOOL_NAMES: tuple[str, ...] = (ASK_USER, DURABLE_WAIT, WRITE_TODOS)


@dataclass(frozen=True)
class BuiltInToolDefinition:
    """A built-in tool as a model sees it.

    Attributes:
        name: The tool's name.
        description: What the tool does, for the model.
        parameters_json: The JSON Schema of its arguments, as JSON text.
    """

    name: str
    description: str
    parameters_json: str

    @property
    def parameters_json_schema(self) -> dict[str, Any]:
        """The JSON Schema of the arguments, as a new dict on every read."""
        return cast(dict[str, Any], json.loads(self.parameters_json))


def _definition(name: str, description: str, schema: Mapping[str, object]) -> BuiltInToolDefinition:
    return BuiltInToolDefinition(name, description, json.dumps(schema, sort_keys=True, separators=(",", ":")))


BUILT_IN_TOOL_DEFINITIONS: Mapping[str, BuiltInToolDefinition] = MappingProxyType(
    {
        ASK_USER: _definition(
            ASK_USER,
            "Ask the user a question and wait for the answer, which comes back as this tool's result "
            '({"status":"answered","answer":"..."}). Use it when you cannot go on without information '
            "only the user has. The user may decline, which you see as the result.",
            {
                "type": "object",
                "properties": {
                    "question": {
                        "type": "string",
                        "description": "The question, complete enough to answer without more context.",
                    },
                    "choices": {
                        "type": "array",
                        "items": {"type": "string"},
                        "description": "Answers to offer the user; leave out for a free-text question.",
                    },
                    "allows_free_text": {
                        "type": "boolean",
                        "description": "Whether the user may answer outside the choices (default true).",
                    },
                },
                "required": ["question"],
                "additionalProperties": False,
            },
        ),
        DURABLE_WAIT: _definition(
            DURABLE_WAIT,
            "Pause this conversation for a number of seconds, for example to check on something again "
            "later. The wait survives restarts; when it ends you continue with this tool's result "
            '({"status":"completed","waited_seconds":...,"reason":"..."}).',
            {
                "type": "object",
                "properties": {
                    "seconds": {
                        "type": "number",
                        "description": "How long to wait, in seconds (at least 1).",
                    },
                    "reason": {"type": "string", "description": "Why you wait, shown to the user."},
                },
                "required": ["seconds", "reason"],
                "additionalProperties": False,
            },
        ),
        WRITE_TODOS: _definition(
            WRITE_TODOS,
            "Write the plan for the user's request as a list of tasks, replacing the previous list. Keep "
            "each task's status current as you work: pending, in_progress or completed. An empty list "
            "clears the plan. Call it at most once per response.",
            {
                "type": "object",
                "properties": {
                    "todos": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "content": {"type": "string", "description": "What the task is."},
                                "status": {
                                    "type": "string",
                                    "enum": [status.value for status in PlanTaskStatus],
                                },
                            },
                            "required": ["content", "status"],
                            "additionalProperties": False,
                        },
                    }
                },
                "required": ["todos"],
                "additionalProperties": False,
            },
        ),
    }
)
"""The enabled built-ins' definitions, by name: offer `AgentTurnContext.enabled_built_in_tools` of them."""


class BuiltInArgumentError(ValueError):
    """A built-in call's arguments are invalid; the call records `failed` with this message."""


@dataclass(frozen=True)
class AskUserArguments:
    """Valid ``ask_user`` arguments."""

    question: str
    choices: tuple[str, ...]
    allows_free_text: bool


@dataclass(frozen=True)
class DurableWaitArguments:
    """Valid ``durable_wait`` arguments, with the wait rounded up to whole seconds."""

    seconds: int
    reason: str


def _parse(arguments: str, tool_name: str, prefix: str, names: Sequence[str]) -> dict[str, Any]:
    try:
        parsed = parse_tool_arguments(arguments, tool_name=tool_name)
    except ToolExecutionError as error:
        raise BuiltInArgumentError(f"{prefix}: {error.message}") from None
    unknown = sorted(name for name in parsed if name not in names)
    if unknown:
        raise BuiltInArgumentError(f"{prefix}: unknown argument {unknown[0]!r}")
    return parsed


def parse_ask_user_arguments(arguments: str) -> AskUserArguments:
    """Check ``ask_user`` arguments; `null` for an optional argument means it is absent.

    Raises:
        BuiltInArgumentError: ``invalid ask_user arguments: <reason>``.
    """
    prefix = f"invalid {ASK_USER} arguments"
    parsed = _parse(arguments, ASK_USER, prefix, ("question", "choices", "allows_free_text"))
    question = parsed.get("question")
    if question is None:
        raise BuiltInArgumentError(f"{prefix}: question is required")
    choices = parsed.get("choices")
    if choices is None:
        choices = []
    if not isinstance(choices, list):
        raise BuiltInArgumentError(f"{prefix}: choices must be a list of texts")
    allows_free_text = parsed.get("allows_free_text")
    if allows_free_text is None:
        allows_free_text = True
    try:
        checked = check_question(question, cast(list[object], choices), allows_free_text)
    except (TypeError, ValueError) as error:
        raise BuiltInArgumentError(f"{prefix}: {error}") from None
    return AskUserArguments(cast(str, question), checked, cast(bool, allows_free_text))


def parse_durable_wait_arguments(arguments: str, max_durable_wait: timedelta) -> DurableWaitArguments:
    """Check ``durable_wait`` arguments against the session's longest wait.

    Raises:
        BuiltInArgumentError: ``invalid durable_wait arguments: <reason>``.
    """
    prefix = f"invalid {DURABLE_WAIT} arguments"
    parsed = _parse(arguments, DURABLE_WAIT, prefix, ("seconds", "reason"))
    seconds = parsed.get("seconds")
    if seconds is None:
        raise BuiltInArgumentError(f"{prefix}: seconds is required")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds):
        raise BuiltInArgumentError(f"{prefix}: seconds must be a number")
    if seconds <= 0:
        raise BuiltInArgumentError(f"{prefix}: seconds must be positive, got {seconds}")
    whole = math.ceil(seconds)
    longest = math.floor(max_durable_wait.total_seconds())
    if whole > longest:
        raise BuiltInArgumentError(f"{prefix}: seconds must be at most {longest}, got {seconds}")
    reason = parsed.get("reason")
    if reason is None:
        raise BuiltInArgumentError(f"{prefix}: reason is required")
    if not isinstance(reason, str):
        raise BuiltInArgumentError(f"{prefix}: reason must be text")
    if utf8_size(reason) > MAX_PLAN_TASK_BYTES:
        raise BuiltInArgumentError(f"{prefix}: reason must be at most {MAX_PLAN_TASK_BYTES} bytes of UTF-8")
    return DurableWaitArguments(whole, reason)


def parse_write_todos_arguments(arguments: str) -> tuple[AgentPlanTask, ...]:
    """Check ``write_todos`` arguments and return the plan's tasks; no tasks clears the plan.

    Raises:
        BuiltInArgumentError: ``invalid todos: <reason>``.
    """
    prefix = "invalid todos"
    parsed = _parse(arguments, WRITE_TODOS, prefix, ("todos",))
    todos = parsed.get("todos")
    if not isinstance(todos, list):
        raise BuiltInArgumentError(f"{prefix}: todos must be a list of tasks")
    items = cast(list[object], todos)
    if len(items) > MAX_PLAN_TASKS:
        raise BuiltInArgumentError(f"{prefix}: a plan holds at most {MAX_PLAN_TASKS} tasks, got {len(items)}")
    tasks: list[AgentPlanTask] = []
    for position, item in enumerate(items, start=1):
        where = f"task {position}"
        if not isinstance(item, dict):
            raise BuiltInArgumentError(f"{prefix}: {where} must be an object with content and status")
        task = cast(dict[str, object], item)
        unknown = sorted(name for name in task if name not in ("content", "status"))
        if unknown:
            raise BuiltInArgumentError(f"{prefix}: {where} has the unknown field {unknown[0]!r}")
        content = task.get("content")
        if not isinstance(content, str) or not content.strip():
            raise BuiltInArgumentError(f"{prefix}: {where} needs non-blank content")
        if utf8_size(content) > MAX_PLAN_TASK_BYTES:
            raise BuiltInArgumentError(
                f"{prefix}: {where}'s content must be at most {MAX_PLAN_TASK_BYTES} bytes of UTF-8"
            )
        status = task.get("status")
        try:
            task_status = PlanTaskStatus(status)
        except ValueError:
            allowed = ", ".join(item.value for item in PlanTaskStatus)
            raise BuiltInArgumentError(f"{prefix}: {where}'s status must be one of {allowed}") from None
        tasks.append(AgentPlanTask(content=content, status=task_status))
    return tuple(tasks)
