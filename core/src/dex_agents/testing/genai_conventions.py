"""The OpenTelemetry GenAI semantic conventions, vendored, and a check that holds a session's spans to them.

``genai_conventions_data/semantic-conventions-genai-<commit>/`` holds the ``model/gen-ai/registry.yaml``
and ``spans.yaml`` of open-telemetry/semantic-conventions-genai, unchanged, as they were at that commit.
The core pins dc3571562603552dc555c667dfa327a638d94ab2; no copy of that commit could be had when the data
was vendored, so it is the one stored copy found, and the directory names its commit.

A span type's attributes are its own references plus those of the groups it references, the later
reference deciding the requirement level, as the conventions' tooling resolves them.

Use it in an adapter's or an application's tests on spans written by `dex_agents.testing.otel_spans`::

    problems = conventions_problems(load_conventions(), spans, is_streaming=lambda span: True)
    assert problems == []

It needs PyYAML, which the ``testing`` extra brings; ``dex_agents.testing`` never imports this module.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

try:
    import yaml
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "dex_agents.testing.genai_conventions needs PyYAML: pip install 'dex-agents[testing]'"
    ) from error

from dex_agents.testing.otel_spans import ExportedSpan

__all__ = [
    "CONVENTIONS_COMMIT",
    "NOT_APPLICABLE",
    "Conventions",
    "SpanRequirement",
    "attribute_table",
    "conventions_problems",
    "load_conventions",
    "span_type_of",
]

CONVENTIONS_COMMIT = "002c8a6ea1c8a42b14a4527db83b3cabcded610a"
_VENDORED = (
    Path(__file__).parent / "genai_conventions_data" / f"semantic-conventions-genai-{CONVENTIONS_COMMIT}"
)
_MODEL = _VENDORED / "model" / "gen-ai"

#: Conditionally required attributes whose condition never holds for a session's spans, and why. A
#: conventions update that adds one fails the check until it is decided here.
NOT_APPLICABLE: Mapping[str, str] = {
    "gen_ai.request.choice.count": "no runner asks for more than one choice",
    "gen_ai.request.seed": "no runner reports a seed",
    "gen_ai.request.top_k": "no runner reports top_k",
    "gen_ai.output.type": "no runner reports a requested output format",
    "gen_ai.agent.id": "a session's agent has a name, not a provider-side ID",
    "gen_ai.agent.description": "AgentTracing has no agent description",
    "gen_ai.agent.version": "AgentTracing has no agent version",
    "gen_ai.data_source.id": "the session does no retrieval",
    "gen_ai.workflow.name": "the session emits no invoke_workflow span",
    "gen_ai.memory.store.id": "the session emits no memory span",
    "gen_ai.memory.record.id": "the session emits no memory span",
}


@dataclass(frozen=True)
class SpanRequirement:
    """One attribute of a span type: its key, requirement level (``required``, ...) and condition."""

    key: str
    level: str
    condition: str | None


@dataclass(frozen=True)
class Conventions:
    """The registry's attribute keys and each span type's resolved attributes."""

    registry: frozenset[str]
    span_types: Mapping[str, Mapping[str, SpanRequirement]]


def _level(entry: Mapping[str, Any]) -> tuple[str, str | None] | None:
    level = entry.get("requirement_level")
    if level is None:
        return None
    if isinstance(level, str):
        return level, None
    (name, condition), *_ = cast(Mapping[str, str], level).items()
    return name, condition


def _resolve(
    entries: Iterable[Mapping[str, Any]],
    groups: Mapping[str, Sequence[Mapping[str, Any]]],
    into: dict[str, SpanRequirement],
) -> None:
    for entry in entries:
        if "ref_group" in entry:
            _resolve(groups[entry["ref_group"]], groups, into)
            continue
        key = entry["ref"]
        level = _level(entry)
        if level is not None:
            into[key] = SpanRequirement(key, level[0], level[1])
        elif key not in into:
            into[key] = SpanRequirement(key, "recommended", None)


def load_conventions() -> Conventions:
    """Read the vendored registry and span definitions."""
    registry = yaml.safe_load((_MODEL / "registry.yaml").read_text(encoding="utf-8"))
    spans = yaml.safe_load((_MODEL / "spans.yaml").read_text(encoding="utf-8"))
    groups = {group["id"]: group["attributes"] for group in spans["attribute_groups"]}
    span_types: dict[str, Mapping[str, SpanRequirement]] = {}
    for span in spans["spans"]:
        resolved: dict[str, SpanRequirement] = {}
        _resolve(span["attributes"], groups, resolved)
        span_types[span["type"]] = resolved
    return Conventions(frozenset(entry["key"] for entry in registry["attributes"]), span_types)


def span_type_of(span: ExportedSpan) -> str:
    """The conventions' span type a session span is: ``invoke_agent`` roots run in the Worker's process."""
    operation = span.attribute("gen_ai.operation.name")
    return {
        "invoke_agent": "gen_ai.invoke_agent.internal",
        # CLIENT for one model call; INTERNAL, which the type allows, when the runner made several or none.
        "chat": "gen_ai.inference.client",
        "execute_tool": "gen_ai.execute_tool.internal",
    }[str(operation)]


def _applies(
    requirement: SpanRequirement, span: ExportedSpan, is_streaming: Callable[[ExportedSpan], bool]
) -> bool | None:
    """Whether a conditionally required attribute must be present (True), absent (False), or either (None)."""
    key = requirement.key
    if key in NOT_APPLICABLE:
        return None
    if key == "error.type":
        return span.status == "ERROR"
    if key == "server.port":
        return True if span.attribute("server.address") is not None else None
    if key == "gen_ai.request.stream":
        return is_streaming(span)
    if key == "gen_ai.request.model":
        # Known to a chat span from the runner's metadata; an activation root precedes every model call.
        return span.attribute("gen_ai.operation.name") == "chat"
    if key in ("gen_ai.conversation.id", "gen_ai.agent.name", "gen_ai.provider.name"):
        return True  # the session ID, and the agent and provider the tests configure, are always available
    raise AssertionError(f"decide whether {key} ({requirement.condition}) applies to a session's spans")


def conventions_problems(
    conventions: Conventions,
    spans: Iterable[ExportedSpan],
    is_streaming: Callable[[ExportedSpan], bool] = lambda span: False,
) -> list[str]:
    """Every way ``spans`` differ from the conventions, one line each; empty when they hold.

    Args:
        conventions: The vendored conventions.
        spans: The spans of real sessions.
        is_streaming: Whether a ``chat`` span's request streamed, which decides ``gen_ai.request.stream``.
    """
    problems: list[str] = []
    for span in spans:
        span_type = span_type_of(span)
        defined = conventions.span_types[span_type]
        attributes = span.attributes
        for key in sorted(attributes):
            if key.startswith("gen_ai.") and key not in conventions.registry:
                problems.append(f"{span.name}: {key} is not in the registry")
        for requirement in defined.values():
            present = requirement.key in attributes
            if requirement.level == "required":
                must: bool | None = True
            elif requirement.level == "conditionally_required":
                must = _applies(requirement, span, is_streaming)
            else:
                continue
            if must is True and not present:
                problems.append(f"{span.name} ({span_type}): {requirement.key} is missing")
            if must is False and present and requirement.key == "gen_ai.request.stream":
                problems.append(f"{span.name}: {requirement.key} is set on a request that did not stream")
    return problems


def attribute_table(conventions: Conventions, spans: Iterable[ExportedSpan]) -> str:
    """A Markdown table of each span kind's attributes: requirement level, and whether a span emitted it."""
    seen: dict[tuple[str, str], set[str]] = {}
    for span in spans:
        operation = str(span.attribute("gen_ai.operation.name"))
        seen.setdefault((operation, span_type_of(span)), set()).update(span.attributes)
    lines = ["| span | attribute | level | emitted |", "| --- | --- | --- | --- |"]
    for (operation, span_type), emitted in sorted(seen.items()):
        defined = conventions.span_types[span_type]
        keys = sorted(
            {key for key in emitted if not key.startswith(("dex.", "session."))}
            | {key for key, requirement in defined.items() if requirement.level != "opt_in" or key in emitted}
        )
        for key in keys:
            requirement = defined.get(key)
            level = "not in the span type" if requirement is None else requirement.level
            lines.append(f"| {operation} | `{key}` | {level} | {'yes' if key in emitted else 'no'} |")
    return "\n".join(lines)
