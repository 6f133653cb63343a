"""Pull dispatch without gRPC: the heartbeat clock, and a wide fan-out waiting for few streams."""

import asyncio

from dex.dexpb import dex_pb2 as pb

from dex_devserver._dispatch import Dispatcher, WorkerFailure
from dex_devserver._pull import PullStream

PULL = pb.WorkerTarget(is_pull_mode=True)


class AnsweringStream:
    """A pull stream whose Worker answers every execute task at once."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.dispatcher = dispatcher
        self.tasks = 0
        self.stream = PullStream("T", "worker", frozenset({"T"}), self._write)

    def _write(self, response: pb.PollWorkerTaskResponse) -> "asyncio.Future[None]":
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        if response.WhichOneof("frame") == "task":
            self.tasks += 1
            result = pb.InvokeExecuteMethodResponse(step_decision=pb.StepDecision())
            frame = pb.PollWorkerTaskFrame(
                task_id=response.task.task_id, execute=pb.InvokeExecuteMethodOutput(result=result)
            )
            loop = asyncio.get_running_loop()
            loop.call_soon(
                self.dispatcher.pull.on_frame, self.stream, pb.PollWorkerTaskRequest(task_frame=frame)
            )
        return done


async def _invoke(dispatcher: Dispatcher, heartbeat_timeout: float) -> object:
    return await dispatcher.invoke(
        PULL,
        "T",
        "execute",
        pb.InvokeExecuteMethodRequest(step_type="S"),
        attempt_timeout=30,
        heartbeat_timeout=heartbeat_timeout,
        on_sent=lambda: None,
        on_progress=lambda _frame: None,
    )


async def test_the_heartbeat_clock_starts_when_a_worker_receives_the_task() -> None:
    dispatcher = Dispatcher(dispatch_wait=10)
    attempt = asyncio.ensure_future(_invoke(dispatcher, heartbeat_timeout=0.2))
    # The task waits for a Worker for longer than its heartbeat timeout; that is not a missed heartbeat.
    await asyncio.sleep(0.6)
    assert not attempt.done()
    worker = AnsweringStream(dispatcher)
    dispatcher.pull.add_stream(worker.stream)
    outcome = await asyncio.wait_for(attempt, 5)
    assert isinstance(outcome, pb.InvokeExecuteMethodResponse), outcome
    assert worker.tasks == 1


async def test_a_wide_fan_out_shares_few_streams_in_order() -> None:
    dispatcher = Dispatcher(dispatch_wait=10)
    workers = [AnsweringStream(dispatcher) for _ in range(3)]
    attempts = [asyncio.ensure_future(_invoke(dispatcher, heartbeat_timeout=60)) for _ in range(300)]
    await asyncio.sleep(0)
    for worker in workers:
        dispatcher.pull.add_stream(worker.stream)
    outcomes = await asyncio.wait_for(asyncio.gather(*attempts), 30)
    assert not [outcome for outcome in outcomes if isinstance(outcome, WorkerFailure)]
    assert sum(worker.tasks for worker in workers) == 300
    assert not dispatcher.pull._waiters  # pyright: ignore[reportPrivateUsage]
