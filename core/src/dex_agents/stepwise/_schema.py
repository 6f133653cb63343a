"""A Python function's signature and docstring as a tool's JSON schema and argument validator.

Pydantic builds one model per function from its type hints, so the schema the model sees and the
validation a call's arguments go through come from the same source. Every problem is found when the tool
is defined, not when the model first calls it.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import pydantic
from pydantic import BaseModel, ConfigDict, Field, create_model

__all__ = ["ArgumentsModel", "ToolDefinitionError", "build_arguments_model", "parse_docstring"]

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|Examples?|Notes?|Attributes"
    r"|See Also):\s*$"
)
_ARGUMENT_SECTIONS = frozenset({"Args", "Arguments", "Parameters", "Params"})
_ARGUMENT_ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_]\w*)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SCHEMA_MAPS = frozenset({"properties", "$defs", "definitions", "patternProperties"})


class ToolDefinitionError(ValueError):
    """A tool that cannot be offered to a model, found when the tool is defined."""


@dataclass(frozen=True)
class ArgumentsModel:
    """The validator and JSON schema of one function's arguments.

    Attributes:
        model: A Pydantic model with one field per parameter; it forbids unknown names.
        json_schema: The model's JSON schema without Pydantic's generated titles.
        parameter_names: The parameters in signature order.
    """

    model: type[BaseModel]
    json_schema: Mapping[str, object]
    parameter_names: tuple[str, ...]

    def validate(self, arguments: Mapping[str, object]) -> dict[str, object]:
        """Return the keyword arguments for the function, converted to its parameter types.

        Args:
            arguments: The arguments the model sent.

        Returns:
            One entry per parameter the model set or that has a default.

        Raises:
            pydantic.ValidationError: If the arguments do not match the parameters.
        """
        validated = self.model.model_validate(dict(arguments))
        return {name: getattr(validated, name) for name in self.parameter_names}


def parse_docstring(docstring: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into the text before its sections and its argument descriptions.

    Args:
        docstring: The function's docstring, if any.

    Returns:
        The description, and each argument's description by name.
    """
    if not docstring:
        return "", {}
    description: list[str] = []
    arguments: dict[str, str] = {}
    section: str | None = None
    entry_indent: int | None = None
    current: str | None = None
    for line in inspect.cleandoc(docstring).splitlines():
        header = _SECTION.match(line)
        if header is not None:
            section, entry_indent, current = header.group(1), None, None
            continue
        if section is None:
            description.append(line)
            continue
        if section not in _ARGUMENT_SECTIONS or not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        entry = _ARGUMENT_ENTRY.match(line.strip())
        if entry is not None and (entry_indent is None or indent <= entry_indent):
            entry_indent = indent
            name = entry.group(1).lstrip("*")
            arguments[name] = entry.group(3).strip()
            current = name
        elif current is not None:
            arguments[current] = f"{arguments[current]} {line.strip()}".strip()
    return "\n".join(description).strip(), arguments


def build_arguments_model(
    function: Callable[..., object], tool_name: str, argument_descriptions: Mapping[str, str]
) -> ArgumentsModel:
    """Build the arguments model of ``function`` from its type hints.

    Args:
        function: The tool's function.
        tool_name: The tool's name, for error messages.
        argument_descriptions: Descriptions by parameter name, from the docstring.

    Returns:
        The validator and JSON schema.

    Raises:
        ToolDefinitionError: If a parameter cannot be described to a model: no type hint, ``*args`` or
            ``**kwargs``, positional-only, a leading underscore, or a type without a JSON schema.
    """
    where = f"tool {tool_name!r}"
    try:
        signature = inspect.signature(function)
        hints = typing.get_type_hints(function, include_extras=True)
    except (NameError, TypeError, ValueError) as error:
        raise ToolDefinitionError(f"{where}: cannot read its signature and type hints: {error}") from error
    fields: dict[str, Any] = {}
    for parameter in signature.parameters.values():
        name = parameter.name
        if parameter.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"{where}: parameter {name!r} collects extra arguments (*args or **kwargs); a model can only "
                "send named arguments, so declare each one"
            )
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"{where}: parameter {name!r} is positional-only; a model sends arguments by name"
            )
        if name.startswith("_"):
            raise ToolDefinitionError(
                f"{where}: parameter {name!r} starts with '_', which a schema cannot name"
            )
        if name not in hints:
            raise ToolDefinitionError(
                f"{where}: parameter {name!r} has no type hint; the model needs one to know what to send"
            )
        default = ... if parameter.default is inspect.Parameter.empty else parameter.default
        fields[name] = (hints[name], Field(default, description=argument_descriptions.get(name)))
    try:
        model = create_model(  # pyright: ignore[reportCallIssue, reportUnknownVariableType]
            f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
        schema = cast(dict[str, object], model.model_json_schema())  # pyright: ignore[reportUnknownMemberType]
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as error:
        raise ToolDefinitionError(f"{where}: its parameters have no JSON schema: {error}") from error
    return ArgumentsModel(
        model=model,
        json_schema=_without_titles(schema),
        parameter_names=tuple(signature.parameters),
    )


def _without_titles(schema: object) -> Any:
    # Pydantic titles every schema after its Python name, which only adds tokens to every request.
    if isinstance(schema, list):
        return [_without_titles(item) for item in cast(list[object], schema)]
    if not isinstance(schema, dict):
        return schema
    cleaned: dict[str, object] = {}
    for key, value in cast(dict[str, object], schema).items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            named = cast(dict[str, object], value)
            cleaned[key] = {name: _without_titles(item) for name, item in named.items()}
        else:
            cleaned[key] = _without_titles(value)
    return cleaned
