"""Service errors carrying the `ServiceErrorResponse` details the SDK maps to exception classes."""

from __future__ import annotations

import grpc
from dex.dexpb import dex_pb2 as pb
from google.protobuf import any_pb2
from google.rpc import status_pb2

__all__ = [
    "ServiceError",
    "already_started",
    "channel_message_not_found",
    "failed_precondition",
    "flow_not_found",
    "invalid_argument",
    "lock_conflict",
    "long_poll_timeout",
    "response_too_large",
    "unavailable",
    "unimplemented",
    "worker_api_error",
]


class ServiceError(Exception):
    """An error answered to a gRPC caller as a status with `ServiceErrorResponse` details.

    Args:
        code: The gRPC status code.
        sub_status: The Dex sub-status the SDK switches on.
        detail: A human-readable message naming the problem.
        worker_error: The Worker's error, for failures that came from a Worker.
    """

    def __init__(
        self,
        code: grpc.StatusCode,
        sub_status: pb.ErrorSubStatus,
        detail: str,
        worker_error: pb.WorkerErrorResponse | None = None,
    ) -> None:
        super().__init__(detail)
        self.code = code
        self.sub_status = sub_status
        self.detail = detail
        self.worker_error = worker_error

    def to_status(self) -> status_pb2.Status:
        """Builds the `google.rpc.Status` sent in `grpc-status-details-bin`.

        Returns:
            The status with one packed `ServiceErrorResponse`.
        """
        response = pb.ServiceErrorResponse(detail=self.detail, sub_status=self.sub_status)
        if self.worker_error is not None:
            response.original_worker_error_detail = self.worker_error.detail
            response.original_worker_error_type = self.worker_error.error_type
            response.original_worker_error_status = self.worker_error.grpc_status
            response.original_worker_error_stack_trace = self.worker_error.stack_trace
        packed = any_pb2.Any()
        packed.Pack(response)  # pyright: ignore[reportUnknownMemberType]
        return status_pb2.Status(code=self.code.value[0], message=self.detail, details=[packed])


def invalid_argument(detail: str) -> ServiceError:
    """Returns a validation error."""
    return ServiceError(grpc.StatusCode.INVALID_ARGUMENT, pb.ERROR_SUB_STATUS_UNCATEGORIZED, detail)


def failed_precondition(detail: str) -> ServiceError:
    """Returns a precondition error that is not a Worker failure."""
    return ServiceError(grpc.StatusCode.FAILED_PRECONDITION, pb.ERROR_SUB_STATUS_UNCATEGORIZED, detail)


def flow_not_found(flow_id: str, run_id: str = "") -> ServiceError:
    """Returns the error for an unknown Flow, an unknown run, or a mutation of a closed run."""
    where = f"Flow {flow_id!r}" + (f" run {run_id!r}" if run_id else "")
    return ServiceError(
        grpc.StatusCode.NOT_FOUND,
        pb.ERROR_SUB_STATUS_FLOW_NOT_EXISTS,
        f"{where} does not exist or is not running",
    )


def already_started(flow_id: str) -> ServiceError:
    """Returns the duplicate-start error."""
    return ServiceError(
        grpc.StatusCode.ALREADY_EXISTS,
        pb.ERROR_SUB_STATUS_FLOW_ALREADY_STARTED,
        f"Flow {flow_id!r} is already started",
    )


def lock_conflict(keys: list[str]) -> ServiceError:
    """Returns the error for an RPC whose lock keys are held; the SDK raises `RpcLockConflictError`."""
    return ServiceError(
        grpc.StatusCode.ABORTED,
        pb.ERROR_SUB_STATUS_WORKER_API_ERROR,
        f"one or more attribute keys are locked: {', '.join(keys)}",
    )


def worker_api_error(detail: str, worker_error: pb.WorkerErrorResponse | None) -> ServiceError:
    """Returns the error for a failed Worker RPC call; the SDK raises `WorkerInvocationError`."""
    return ServiceError(
        grpc.StatusCode.FAILED_PRECONDITION, pb.ERROR_SUB_STATUS_WORKER_API_ERROR, detail, worker_error
    )


def long_poll_timeout(what: str) -> ServiceError:
    """Returns the long-poll expiry error; the SDK raises `LongPollTimeoutError`."""
    return ServiceError(
        grpc.StatusCode.DEADLINE_EXCEEDED,
        pb.ERROR_SUB_STATUS_LONG_POLL_TIME_OUT,
        f"long poll timed out: {what}",
    )


def channel_message_not_found(channel: str, message_id: str) -> ServiceError:
    """Returns the error for a transactional delete of a message that is not queued."""
    return ServiceError(
        grpc.StatusCode.NOT_FOUND,
        pb.ERROR_SUB_STATUS_CHANNEL_MESSAGE_NOT_FOUND,
        f"channel message {message_id!r} not found in channel {channel!r}; no write of this RPC was applied",
    )


def response_too_large(detail: str) -> ServiceError:
    """Returns the error for a response the SDK could not receive."""
    return ServiceError(grpc.StatusCode.RESOURCE_EXHAUSTED, pb.ERROR_SUB_STATUS_UNCATEGORIZED, detail)


def unavailable(detail: str) -> ServiceError:
    """Returns the error for a change the devserver could not commit (the caller may retry)."""
    return ServiceError(grpc.StatusCode.UNAVAILABLE, pb.ERROR_SUB_STATUS_UNCATEGORIZED, detail)


def unimplemented(feature: str) -> ServiceError:
    """Returns the error for a feature the devserver does not implement."""
    return ServiceError(
        grpc.StatusCode.UNIMPLEMENTED,
        pb.ERROR_SUB_STATUS_UNCATEGORIZED,
        f"{feature} is not implemented by dex-devserver",
    )
