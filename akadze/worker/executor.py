"""Runs one claimed job: decode its arguments, hooks, the body (a thread for sync tasks), the
timeout; then decides its outcome once (outcomes.decide). Never raises; returns what to write."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import msgspec
import pydantic

from akadze import hooks
from akadze.codec import encode_result
from akadze.codec.drift import DEFAULT_LOG, DriftLog, UnrunnableArgsError, check_drift, describe
from akadze.codec.stored import UnreadableArgs
from akadze.context import RunContext, enter, leave
from akadze.errors import UndecodableJobError, UnknownTaskError
from akadze.events import tracing
from akadze.job import Job, JobState
from akadze.outcomes import Cancel, Completed, Completion, RunEnd, Transition, Verdict, decide

if TYPE_CHECKING:
    from akadze.app import Akadze
    from akadze.task import Task

logger = logging.getLogger("akadze.worker")
#: a failed run's traceback, at DEBUG (``akadze worker --log-tracebacks`` enables this one alone)
traceback_logger = logging.getLogger("akadze.worker.traceback")


class RunTimeout(TimeoutError):
    """The run exceeded its task's timeout."""


def decode_args(task: Task[Any, Any], job: Job, drift_log: DriftLog) -> dict[str, Any]:
    """Validate the stored arguments into the declared types.

    When the producer built them against another schema (codegen drift) and they no longer
    decode, ArgsSchemaMismatch names both fingerprints and the fields: no retry can help.
    Invalid arguments without drift are a ValueError (an error like any other). A task with
    ``unknown_args="ignore"`` runs without the stored arguments it does not declare.
    """
    stored: Mapping[str, Any] = job.args
    ignored: list[str] = []
    if task.options.unknown_args == "ignore" and isinstance(stored, dict):
        stored, ignored = task.codec.split_unknown(stored)
    kwargs: dict[str, Any] | None
    error: pydantic.ValidationError | None
    try:
        decoded = task.codec.decode(msgspec.json.encode(stored))
    except pydantic.ValidationError as exc:
        kwargs, error = None, exc
    else:
        if not ignored and (not job.args_fp or job.args_fp == task.args_fp):
            return decoded  # check_drift's first row (built against this schema, it decodes), at no cost
        kwargs, error = decoded, None
    verdict = check_drift(task.name, task.args_fp, job.args_fp, error, ignored=ignored, log=drift_log)
    if verdict.warning:
        logger.warning(verdict.warning)
    if verdict.error is not None:
        raise verdict.error
    if kwargs is None:
        assert error is not None
        raise ValueError(f"invalid arguments for task {task.name!r}: {describe(error)[1]}")
    return kwargs


def _in_thread(fn: Callable[..., Any], kwargs: Mapping[str, Any], name: str) -> asyncio.Future[Any]:
    """Run a sync task in its own thread; a timeout abandons the thread, it is not stopped."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def hand_over(value: Any, error: BaseException | None) -> None:
        # a thread abandoned by its timeout may end after the worker's loop closed: nobody
        # waits for it any more, and that is no error
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, value, error)

    def target() -> None:
        try:
            value = context.run(fn, **kwargs)
        except BaseException as exc:  # handed to the loop: the run's error
            hand_over(None, exc)
        else:
            hand_over(value, None)

    threading.Thread(target=target, name=name, daemon=True).start()
    return future


class Ran(msgspec.Struct, frozen=True):
    """How one run ended, before anything is decided of it."""

    end: RunEnd
    #: what the run raised (RAISED, UNDECODABLE)
    error: BaseException | None = None
    #: its return value, encoded (a run that returned JSON, or committed with complete_tx)
    result: str | None = None
    #: the error came from the task's own code: its backoff and retry_priority apply
    by_task: bool = False
    #: complete_tx() committed the job succeeded: nothing is left to decide
    committed: bool = False
    #: the workflow steps that commit released or cancelled
    settled: tuple[Completed, ...] = ()


async def execute(app: Akadze, job: Job, *, drift_log: DriftLog = DEFAULT_LOG) -> Completion:
    """Run ``job`` (claimed, state running) and decide its next state, once: its arguments
    (:func:`_arguments`), the body, how it ended (:func:`_ended`), the decision
    (:func:`_decided`).

    A cancellation of this coroutine (forced shutdown) ends the run with the shutdown
    outcome: back to queued, attempt given back.
    """
    task = app.tasks.get(job.task)
    kwargs = _arguments(task, job, drift_log)
    if type(kwargs) is Ran:  # the job cannot run
        return _decided(job, task, kwargs)
    assert task is not None and isinstance(kwargs, dict)

    ctx = RunContext(app, job)
    token = enter(ctx)
    # the run's consumer span, current while the task runs (None unless tracing is on)
    traced = tracing.start_run(job)
    value: Any = None
    error: BaseException | None = None
    try:
        if app.hooks.before_run:  # no coroutine per run when there is no hook
            await hooks.call(app.hooks.before_run, job)
        timeout = task.options.timeout.total_seconds() if task.options.timeout else None
        if timeout is None:
            value = await _body(app, task, job, kwargs)
        else:
            deadline = asyncio.timeout(timeout)
            try:
                async with deadline:
                    value = await _body(app, task, job, kwargs)
            except TimeoutError:
                if deadline.expired():
                    raise RunTimeout(f"the run exceeded its timeout of {timeout:g}s") from None
                raise
    except asyncio.CancelledError as exc:
        running = asyncio.current_task()
        if ctx.stopped_by_worker:
            # past its cancel grace (worker/cancels.py): ends as a Cancel, and the task goes on
            # uncancelled to hand its outcome over
            if running is not None:
                running.uncancel()
            error = Cancel("stopped by the worker: the run went on past its cancel grace")
        elif running is None or running.cancelling():
            return _decided(job, task, _SHUTDOWN)  # the worker stopped this run: back to queued
        else:
            # nobody cancelled the run: the task raised CancelledError itself, an error like any other
            error = exc
    except BaseException as exc:  # the run's error, whatever the task raised
        error = exc
    finally:
        tracing.leave_run(traced)
        leave(token)
    return _decided(job, task, _ended(job, ctx, value, error))


#: how a run the worker stopped ended
_SHUTDOWN = Ran(RunEnd.SHUTDOWN)


def _arguments(task: Task[Any, Any] | None, job: Job, drift_log: DriftLog) -> dict[str, Any] | Ran:
    """The keyword arguments ``job`` runs with, or how it ended without running: its stored
    arguments unreadable or refused, its task unknown to this worker."""
    if isinstance(job.args, UnreadableArgs):
        return Ran(RunEnd.UNDECODABLE, UndecodableJobError(job.id, job.args.reason))
    if task is None:
        return Ran(RunEnd.RAISED, UnknownTaskError(job.task))
    try:
        return decode_args(task, job, drift_log)
    except UnrunnableArgsError as exc:
        return Ran(RunEnd.UNDECODABLE, exc)
    except ValueError as exc:
        return Ran(RunEnd.RAISED, exc)


def _ended(job: Job, ctx: RunContext, value: Any, error: BaseException | None) -> Ran:
    """How a run that went through its body ended: its return value encoded, or its error."""
    if ctx.completed is not None:
        return Ran(
            RunEnd.RETURNED,
            result=_after_commit(job, value, error),
            committed=True,
            settled=tuple(ctx.settled),
        )
    if error is None:
        try:
            return Ran(RunEnd.RETURNED, result=encode_result(value))
        except Exception as exc:
            error = exc
    if traceback_logger.isEnabledFor(logging.DEBUG):
        # the type and message are logged at WARNING once the outcome is written (events)
        traceback_logger.debug(
            "job_id=%d task=%s attempt=%d: the run raised", job.id, job.task, job.attempt, exc_info=error
        )
    return Ran(RunEnd.RAISED, error, by_task=True)


def _decided(job: Job, task: Task[Any, Any] | None, ran: Ran) -> Completion:
    """The one decision of a run: ``job``'s next state, from how the run ended."""
    plain = job.workflow_id is None
    if ran.committed:
        succeeded = Transition(
            JobState.SUCCEEDED, job.attempt, None, cancellable=False, verdict=Verdict.SUCCEEDED
        )
        return Completion(
            job.id, job.run, succeeded, ran.result, committed=True, settled=ran.settled, plain=plain
        )
    options = task.options if task is not None and ran.by_task else None
    transition = decide(
        ran.end,
        attempt=job.attempt,
        max_attempts=job.max_attempts,
        error=ran.error,
        policy=options.backoff if options else None,
        retry_priority=options.retry_priority if options else None,
    )
    return Completion(job.id, job.run, transition, ran.result, plain=plain)


async def _body(app: Akadze, task: Task[Any, Any], job: Job, kwargs: dict[str, Any]) -> Any:
    """The task's function and the after_run hooks: what the timeout covers."""
    if task.is_async:
        value = await task.fn(**kwargs)
    else:
        value = await _in_thread(task.fn, kwargs, f"akadze-job-{job.id}")
    if app.hooks.after_run:
        await hooks.call(app.hooks.after_run, job)
    return value


def _after_commit(job: Job, value: Any, error: BaseException | None) -> str | None:
    """complete_tx committed: the job succeeded with the block. What the body did after it
    cannot change that; a JSON return value is its result (returned), the rest is logged."""
    if error is not None:
        logger.warning(
            "job %d: the task raised %s after complete_tx committed; the job stays succeeded",
            job.id,
            type(error).__name__,
        )
        return None
    try:
        return encode_result(value)
    except Exception as exc:
        logger.warning("job %d: %s; the job stays succeeded without a result", job.id, exc)
        return None
