"""Message storage in process: the session's storage functions on the SDK's own Step context.

``StoredSession`` keeps a session's Attributes in a dict and hands each simulated Step a real SDK
``InvocationContext`` (the class the Worker builds for every Step) over them, with the session's codecs and
the loads a movement would list. ``commit`` applies the Step's writes as the server does. So the unit tests
exercise the exact encoding, buffered-write and load rules of a Worker, without a server.

It uses two SDK internals (``InvocationContext`` and the Registry's registered Flow), pinned by the SDK
version in ``pyproject.toml``.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from dex import AttributeMapLoad, Registry
from dex._invocation_context import InvocationContext, InvocationMethod  # pyright: ignore[reportPrivateUsage]
from dex._value_mapper import ValueMapper  # pyright: ignore[reportPrivateUsage]
from dex.dexpb import dex_pb2 as pb

from dex_agents import (
    AGENT_MESSAGE_CHUNKS,
    AGENT_MESSAGES,
    AgentSessionFlow,
    AgentSessionOptions,
    AgentSessionStatus,
    AgentState,
    FrameworkMessage,
    MessageRole,
    agent_codec_registry,
)
from tests.test_unit_values import _Runner  # pyright: ignore[reportPrivateUsage]

WINDOW = f"{AGENT_MESSAGES.name}/"
ALL_CHUNKS = f"{AGENT_MESSAGE_CHUNKS.name}/"


def message(text: str, role: MessageRole = MessageRole.ASSISTANT) -> FrameworkMessage:
    """A runner message whose stored size grows with ``text``."""
    return FrameworkMessage(role=role, framework_item=f'{{"text":"{text}"}}', text=text)


@dataclass
class StoredSession:
    """One session's Attributes, and Steps that read and write them through the SDK's context."""

    options: AgentSessionOptions = field(default_factory=AgentSessionOptions)
    attributes: dict[str, pb.Value] = field(default_factory=dict[str, pb.Value])
    state: AgentState = field(
        default_factory=lambda: AgentState(AgentSessionStatus.RUNNING_MODEL, 0, "turn-1", 1, None)
    )

    def __post_init__(self) -> None:
        codecs = agent_codec_registry()
        # The Flow only registers the persistence; the storage functions take ``options`` themselves.
        self.flow = AgentSessionFlow(_Runner(), flow_type="Storage")
        registry = Registry([self.flow], codec_registry=codecs, allow_async_handlers=True)
        self._registered = registry._flow_by_type("Storage")  # pyright: ignore[reportPrivateUsage]
        self._values = ValueMapper(codecs)

    def step(
        self, *, window: bool = True, chunks: Iterable[AttributeMapLoad] | None = None
    ) -> InvocationContext:
        """A Step context loading the window (if ``window``) and ``chunks`` (every chunk when `None`)."""
        loads = [WINDOW] if window else []
        if chunks is None:
            loads.append(ALL_CHUNKS)
        else:
            loads.extend(load.physical_name for load in chunks)
        selected = [
            pb.KV(key=key, value=value)
            for key, value in sorted(self.attributes.items())
            if "/" not in key
            or any(key == load or (load.endswith("/") and key.startswith(load)) for load in loads)
        ]
        return InvocationContext(
            InvocationMethod.EXECUTE,
            self._registered,
            pb.Context(flow_id="session-1", run_id="run-1", attempt=1),
            self._values,
            selected,
            loaded_attribute_map_instances=loads,
        )

    def commit(self, context: InvocationContext) -> list[str]:
        """Apply the Step's writes as the server does; return the keys it wrote or deleted."""
        for key, write in context.attribute_writes.items():
            if write.value.WhichOneof("kind") == "null_value":
                self.attributes.pop(key, None)
            else:
                self.attributes[key] = write.value
        return sorted(context.attribute_writes)

    def keys(self, prefix: str) -> list[str]:
        return sorted(key for key in self.attributes if key.startswith(prefix))

    def written_bytes(self, context: InvocationContext, prefix: str) -> int:
        return sum(
            len(write.value.obj_value.payload)
            for key, write in context.attribute_writes.items()
            if key.startswith(prefix) and write.value.WhichOneof("kind") == "obj_value"
        )


def sequences(messages: Sequence[object]) -> list[int]:
    return [getattr(item, "sequence") for item in messages]  # noqa: B009
