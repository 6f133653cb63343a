"""The graph checkpoint a turn keeps in `FrameworkRunState` while its tool calls run.

Each `run_model_step` runs the graph on a thread of its own in the runner's `DexCheckpointSaver`. When
the graph stops at the tool gate's interrupts, the runner exports the thread's latest checkpoint and its
pending writes (the interrupts, and the tool tasks LangGraph resumes) as text, through the saver's own
serializer, and the session stores that text. The next `run_model_step` imports it into a fresh thread,
in any process, and resumes with `Command(resume=...)`.

The serializer is strict by default: it rebuilds only LangGraph's allowlist of safe types (LangChain
messages, `Interrupt`, `Send`, standard library values) and the types listed in `allowed_msgpack_modules`.
It constructs no other type: a value of any other type comes back as the plain data it was stored as (a
dataclass as a dict of its fields, for example), never as its class, and LangGraph logs a warning once
per type. So a stored run state cannot make a Worker construct arbitrary objects.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from dex_agents import RunStateFormat
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

__all__ = ["RUN_STATE_FORMAT", "DexCheckpointSaver", "LangGraphRunState"]

RUN_STATE_FORMAT = RunStateFormat("dex-agents-langgraph/run-state", 1, "LangGraphRunner")
"""The run state's envelope. Version 1 is release 0.1.0's shape too, so a turn it started resumes here."""
_MESSAGES = "messages"


def _encode(typed: tuple[str, bytes]) -> list[str]:
    return [typed[0], base64.b64encode(typed[1]).decode("ascii")]


def _decode(encoded: list[str]) -> tuple[str, bytes]:
    return (encoded[0], base64.b64decode(encoded[1]))


class DexCheckpointSaver(InMemorySaver):
    """An in-memory checkpoint saver whose threads can be exported as text and imported elsewhere.

    Build your graph with it (the runner passes one to your factory); the runner gives every model call a
    thread of its own and deletes the thread when the call returns, so the saver holds nothing between
    Steps.

    Args:
        allowed_msgpack_modules: Extra ``(module, class)`` pairs the serializer may rebuild, for custom
            types in your graph's state. By default only LangGraph's safe types are rebuilt.
    """

    def __init__(self, *, allowed_msgpack_modules: Iterable[tuple[str, ...]] = ()) -> None:
        extra = [tuple(entry) for entry in allowed_msgpack_modules]
        # `None` is LangGraph's strict mode: only its built-in allowlist of safe types is rebuilt.
        serde = JsonPlusSerializer(allowed_msgpack_modules=extra or None)
        super().__init__(serde=serde)

    def export_thread(self, thread_id: str, *, stored_message_ids: Collection[str] = ()) -> dict[str, Any]:
        """Return the latest checkpoint of every namespace of a thread, with its pending writes.

        Args:
            thread_id: The thread.
            stored_message_ids: IDs of messages the session already stores. They are left out of the
                checkpoint's `messages` list, which keeps only their IDs in order, so the run state grows
                with the turn rather than with the whole conversation; `import_thread` puts them back.

        Returns:
            A JSON-ready mapping; `import_thread` reads it.

        Raises:
            ValueError: If the thread has no checkpoint.
        """
        checkpoints: list[dict[str, Any]] = []
        seen: set[str] = set()
        for saved in self.list({"configurable": {"thread_id": thread_id}}):
            namespace = cast(str, saved.config.get("configurable", {}).get("checkpoint_ns", ""))
            if namespace in seen:
                continue  # `list` is newest first: only the latest checkpoint per namespace resumes
            seen.add(namespace)
            writes: dict[str, list[list[Any]]] = {}
            for task_id, channel, value in saved.pending_writes or ():
                writes.setdefault(task_id, []).append([channel, _encode(self.serde.dumps_typed(value))])
            checkpoint, message_layout = _without_stored_messages(saved.checkpoint, stored_message_ids)
            checkpoints.append(
                {
                    "checkpoint_ns": namespace,
                    "message_layout": message_layout,
                    "checkpoint": _encode(self.serde.dumps_typed(checkpoint)),
                    "metadata": _encode(self.serde.dumps_typed(saved.metadata)),
                    "writes": [[task_id, task_writes] for task_id, task_writes in writes.items()],
                }
            )
        if not checkpoints:
            raise ValueError(f"thread {thread_id!r} has no checkpoint to export")
        return {"checkpoints": checkpoints}

    def import_thread(
        self,
        thread_id: str,
        exported: dict[str, Any],
        *,
        stored_messages: Sequence[BaseMessage] = (),
    ) -> None:
        """Load a thread written by `export_thread` under a new thread ID.

        Args:
            thread_id: The thread to create.
            exported: What `export_thread` returned.
            stored_messages: The session's stored messages in order, to put back the ones the export left out.

        Raises:
            ValueError: If the text holds a type outside the serializer's allowlist, is malformed, or
                leaves out a message that ``stored_messages`` does not have.
        """
        try:
            for saved in cast(list[dict[str, Any]], exported["checkpoints"]):
                namespace = cast(str, saved["checkpoint_ns"])
                checkpoint = _with_stored_messages(
                    cast(Checkpoint, self.serde.loads_typed(_decode(saved["checkpoint"]))),
                    cast(dict[str, Any] | None, saved.get("message_layout")),
                    stored_messages,
                )
                metadata = cast(CheckpointMetadata, self.serde.loads_typed(_decode(saved["metadata"])))
                parent: RunnableConfig = {
                    "configurable": {"thread_id": thread_id, "checkpoint_ns": namespace}
                }
                versions: ChannelVersions = dict(checkpoint["channel_versions"])
                config = self.put(parent, checkpoint, metadata, versions)
                for task_id, task_writes in cast(list[list[Any]], saved["writes"]):
                    values = [
                        (cast(str, channel), self.serde.loads_typed(_decode(value)))
                        for channel, value in cast(list[list[Any]], task_writes)
                    ]
                    self.put_writes(config, values, cast(str, task_id))
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(
                f"the framework run state holds no valid LangGraph checkpoint: {error}"
            ) from error


def _without_stored_messages(
    checkpoint: Checkpoint, stored_message_ids: Collection[str]
) -> tuple[Checkpoint, dict[str, Any] | None]:
    """Leave stored messages out of a checkpoint's `messages`; return it and how to put them back.

    In the usual shape the stored history is the list's prefix, recorded as its length and a digest of
    its IDs, so the run state does not grow with the conversation at all; otherwise the full ID order is
    kept.
    """
    values = checkpoint.get("channel_values") or {}
    messages = values.get(_MESSAGES)
    if not stored_message_ids or not isinstance(messages, list):
        return checkpoint, None
    listed = cast(list[object], messages)
    if not all(isinstance(message, BaseMessage) and message.id for message in listed):
        return checkpoint, None  # without an ID per message the order could not be rebuilt
    ids = [cast(str, cast(BaseMessage, message).id) for message in listed]
    kept = [
        message
        for message, message_id in zip(listed, ids, strict=True)
        if message_id not in stored_message_ids
    ]
    prefix = len(listed) - len(kept)
    if all(message_id in stored_message_ids for message_id in ids[:prefix]):
        layout: dict[str, Any] = {"stored_prefix": prefix, "stored_digest": _digest(ids[:prefix])}
    else:
        layout = {"order": ids}
    return {**checkpoint, "channel_values": {**values, _MESSAGES: kept}}, layout


def _with_stored_messages(
    checkpoint: Checkpoint, layout: dict[str, Any] | None, stored_messages: Sequence[BaseMessage]
) -> Checkpoint:
    """Put the messages `_without_stored_messages` left out back, in their order."""
    if layout is None:
        return checkpoint
    values = checkpoint["channel_values"]
    kept = cast(list[BaseMessage], values.get(_MESSAGES) or [])
    if "stored_prefix" in layout:
        prefix = list(stored_messages[: int(layout["stored_prefix"])])
        if (
            len(prefix) != layout["stored_prefix"]
            or _digest([m.id or "" for m in prefix]) != layout["stored_digest"]
        ):
            raise ValueError("the run state's conversation history does not match the stored messages")
        messages = [*prefix, *kept]
    else:
        by_id = {message.id: message for message in [*stored_messages, *kept]}
        messages = []
        for message_id in cast(list[str], layout["order"]):
            message = by_id.get(message_id)
            if message is None:
                raise ValueError(
                    f"message {message_id!r} is neither in the run state nor among the stored messages"
                )
            messages.append(message)
    return {**checkpoint, "channel_values": {**values, _MESSAGES: messages}}


def _digest(message_ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(message_ids).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class LangGraphRunState:
    """A turn between a model call that asked for tools and the model call that continues it.

    Attributes:
        thread: The exported graph thread, stopped at the tool gate's interrupts.
        tool_call_ids: The IDs of the deferred tool calls, in model order.
    """

    thread: dict[str, Any]
    tool_call_ids: tuple[str, ...]

    def to_json(self) -> str:
        """Return the run state as the JSON text the session stores."""
        return RUN_STATE_FORMAT.wrap({"tool_call_ids": list(self.tool_call_ids), "thread": self.thread})

    @classmethod
    def from_json(cls, text: str) -> LangGraphRunState:
        """Read a run state written by `to_json`.

        Args:
            text: The stored `FrameworkRunState`.

        Returns:
            The run state.

        Raises:
            RunStateFormatError: If the text is not a run state of this runner, or of another version.
            ValueError: If it is this runner's, but its fields are malformed.
        """
        fields = RUN_STATE_FORMAT.unwrap(text)
        thread = fields.get("thread")
        tool_call_ids = fields.get("tool_call_ids")
        if not isinstance(thread, dict) or not isinstance(tool_call_ids, list):
            raise ValueError(
                "the framework run state of LangGraphRunner lacks its graph thread or its tool call IDs"
            )
        return cls(
            thread=cast(dict[str, Any], thread),
            tool_call_ids=tuple(str(tool_call_id) for tool_call_id in cast(list[object], tool_call_ids)),
        )
