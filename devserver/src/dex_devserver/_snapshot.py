"""Run snapshots: pickle with protobuf messages stored as their serialized bytes."""

from __future__ import annotations

import dataclasses
import io
import pickle
from typing import Any

from dex.dexpb import dex_pb2 as pb
from google.protobuf.message import Message

from ._model import FlowRun

__all__ = ["dump_run", "load_run"]


def _message(name: str, data: bytes) -> Message:
    cls: type[Message] = getattr(pb, name)
    return cls.FromString(data)


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:  # pyright: ignore[reportIncompatibleMethodOverride]
        if isinstance(obj, Message):
            return _message, (type(obj).__name__, obj.SerializeToString())
        return NotImplemented


def dump_run(run: FlowRun) -> bytes:
    """Serializes a run without its Attributes, which the store keeps per key."""
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=5).dump(dataclasses.replace(run, attributes={}))
    return buffer.getvalue()


def load_run(data: bytes) -> FlowRun:
    """Restores a run written by `dump_run`."""
    run = pickle.loads(data)
    if not isinstance(run, FlowRun):
        raise TypeError("the stored snapshot is not a Flow run")
    return run
