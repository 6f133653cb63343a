"""Keeping what the devserver sends under the SDK's 4 MiB gRPC receive limit.

The SDK's Client and Worker use gRPC's default receive limit. Pages (history, Stream messages) stop before
it; a single message that would still be too large (a Worker request carrying thousands of small
Attributes, a Flow result with thousands of outputs) has its largest inline values offloaded to blobs,
which the SDK hydrates through `LoadBlobs`, and is refused with a clear error when even that is not enough.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from dex.dexpb import dex_pb2 as pb
from google.protobuf.message import Message

from ._blobs import value_size
from ._history import values_in

__all__ = ["RESPONSE_BUDGET", "RESPONSE_LIMIT", "ResponseTooLargeError", "fit", "inline_values"]

RESPONSE_LIMIT = 4 * 1024 * 1024
# Room for gRPC framing and for a page's own fields.
RESPONSE_BUDGET = RESPONSE_LIMIT - 64 * 1024
# A blob reference costs about 70 bytes; offloading a smaller value saves nothing worth a LoadBlobs.
_WORTH_OFFLOADING = 128


class ResponseTooLargeError(Exception):
    """A message stays above the SDK's receive limit even with its large values offloaded.

    Args:
        what: Names the message, such as ``the execute request of Summarize-3``.
        size: Its size in bytes after offloading.
    """

    def __init__(self, what: str, size: int) -> None:
        super().__init__(
            f"{what} is {size} bytes even with its large values offloaded to blobs, above the"
            f" {RESPONSE_LIMIT} bytes the SDK can receive; keep fewer Attributes or messages in the Flow"
            " (load AttributeMaps and Channels selectively)"
        )
        self.what = what
        self.size = size


def inline_values(message: Message) -> Iterator[pb.Value]:
    """Yields every string or object `Value` in a message that is worth offloading."""
    return (value for value in values_in(message) if value_size(value) > _WORTH_OFFLOADING)


def fit(
    message: Message, offload: Callable[[pb.Value], pb.Value], what: str, budget: int = RESPONSE_BUDGET
) -> None:
    """Makes a message fit the budget by offloading its largest inline values, in place.

    Args:
        message: The message to send.
        offload: Stores a value as a blob of the message's Flow and returns the reference.
        what: Names the message in the error.
        budget: The largest serialized size allowed.

    Raises:
        ResponseTooLargeError: When the message is still too large with every value worth it offloaded.
    """
    size = message.ByteSize()
    if size <= budget:
        return
    candidates = iter(sorted(inline_values(message), key=value_size, reverse=True))
    while size > budget:
        # The running estimate ignores enclosing length prefixes; the real size is checked when it says done.
        for value in candidates:
            before = value.ByteSize()
            value.CopyFrom(offload(value))
            size -= before - value.ByteSize()
            if size <= budget:
                break
        else:
            raise ResponseTooLargeError(what, message.ByteSize())
        size = message.ByteSize()
