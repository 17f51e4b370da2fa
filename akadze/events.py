"""The events a process publishes after each job transition commits, and their delivery.

Metrics, traces, dashboards and the worker's own transition log read the system here, never
inside a transaction: ``app.subscribe(callback)`` registers a plain function that receives
every :class:`Event` on one thread of its own ("akadze-events"). Publishing is a bounded queue
append: a subscriber that raises is logged and skipped, a slow one lets the queue fill and
later events are dropped (counted in ``app.events.dropped`` and logged), and a transition
never waits for either. Events carry no task arguments and no results.
"""

from __future__ import annotations

import collections
import enum
import inspect
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeAlias

import msgspec

from akadze.errors import ConfigError
from akadze.job import Job, JobState
from akadze.outcomes import Completed, ErrorType, Verdict

logger = logging.getLogger("akadze.events")
#: the transition log line is written on the worker's logger, as it always was documented
transition_logger = logging.getLogger("akadze.worker")

#: events waiting for the subscribers; past this, new events are dropped and counted
MAX_QUEUED = 10_000
#: how long the events thread lets events gather after a wake-up (the delivery latency)
GATHER_S = 0.01
#: a failed run's error message is logged up to this many characters (as stored on the job)
MAX_LOGGED_MESSAGE = 2000
#: a subscriber that keeps raising, or drops that keep happening, are logged this often
LOG_EVERY_S = 60.0


class Kind(enum.StrEnum):
    """Which transition an event reports."""

    #: queued -> running: a worker claimed the job and its run starts (``wait_s`` is set)
    CLAIMED = "claimed"
    #: running -> any: a run's outcome was written (``outcome`` says how the run ended)
    ENDED = "ended"
    #: running -> succeeded by ``complete_tx()``, published when the run ends
    COMMITTED = "committed"
    #: running -> queued/failed/cancelled: a worker rescued the run of a lost worker
    RESCUED = "rescued"
    #: queued -> cancelled without a run (cancel requested, or expired, before a claim)
    CANCELLED = "cancelled"
    #: failed -> queued by ``requeue(..., app=app)``
    REQUEUED = "requeued"
    #: a schedule's fire time enqueued this job (``from_state`` is None)
    FIRED = "fired"


class Event(msgspec.Struct, frozen=True, gc=False):
    """One committed transition of one job. Immutable; never holds arguments or results.

    Durations are seconds as floats: ``duration_s`` on the publishing worker's monotonic
    clock (claim to outcome), ``wait_s`` on the database's clock (from ``run_at`` to the
    claim). Both are None where they do not apply.
    """

    kind: Kind
    job_id: int
    task: str
    queue: str
    #: None when the transition created the job (a schedule fire)
    from_state: JobState | None
    to_state: JobState
    #: the attempt counter after the transition
    attempt: int
    #: the fencing counter of the run this transition started or ended (0 before any claim)
    run: int
    #: how the run ended (ENDED, COMMITTED and RESCUED events); None otherwise
    outcome: Verdict | None = None
    duration_s: float | None = None
    wait_s: float | None = None
    #: the type of the run's error entry: a qualified class name or an ErrorType value
    error_type: str | None = None
    #: the worker that published the event (None outside a worker)
    worker_id: str | None = None
    #: wall-clock time the event was built, just after the commit (time.time())
    at: float = msgspec.field(default_factory=time.time)
    #: the message of the run's error entry, as stored on the job (the task's own words:
    #: never arguments, unless the task put them in its exception)
    error_message: str | None = None


#: a subscriber: a plain function of one event, run on the events thread
Subscriber: TypeAlias = Callable[[Event], None]


def event_of(
    kind: Kind,
    job: Job | Completed,
    from_state: JobState | None,
    *,
    worker_id: str | None = None,
    outcome: Verdict | None = None,
    duration_s: float | None = None,
    wait_s: float | None = None,
    error_type: str | None = None,
    error_message: str | None = None,
) -> Event:
    """The event of ``job``'s transition from ``from_state`` to its state now."""
    return Event(
        kind,
        job.id,
        job.task,
        job.queue,
        from_state,
        job.state,
        job.attempt,
        job.run,
        outcome,
        duration_s,
        wait_s,
        error_type,
        worker_id,
        error_message=error_message,
    )


def log_transition(event: Event) -> None:
    """The worker's transition log line: one per run end and per cancel before a run.

    INFO for most; WARNING for a run that failed and will run again (with its error's type
    and message, as stored on the job); ERROR for a job that failed for good. The fields go on
    the record too (``extra``), for the JSON format (akadze/logs.py).
    """
    if event.kind is Kind.CLAIMED or event.kind is Kind.RESCUED or event.kind is Kind.FIRED:
        return  # claims are not logged; rescues and fires log their own line where they happen
    outcome = event.outcome
    if outcome is Verdict.FAILED:
        level = logging.ERROR
    elif outcome is Verdict.RETRIED and event.error_type != ErrorType.RETRY:
        level = logging.WARNING
    else:
        level = logging.INFO  # an explicit Retry is the task's instruction, not a failure
    if not transition_logger.isEnabledFor(level):
        return
    duration_ms = round(event.duration_s * 1000, 1) if event.duration_s is not None else None
    fields = {
        "job_id": event.job_id,
        "task": event.task,
        "queue": event.queue,
        "state": event.to_state.value,
        "attempt": event.attempt,
        "duration_ms": duration_ms,
        "outcome": outcome.value if outcome is not None else None,
    }
    if event.error_type is None:
        transition_logger.log(
            level,
            "job_id=%d task=%s queue=%s state=%s attempt=%d duration_ms=%s",
            event.job_id,
            event.task,
            event.queue,
            event.to_state.value,
            event.attempt,
            duration_ms if duration_ms is not None else "-",
            extra=fields,
        )
        return
    message = event.error_message or ""
    if len(message) > MAX_LOGGED_MESSAGE:
        message = message[:MAX_LOGGED_MESSAGE] + " [truncated]"
    fields["error_type"] = event.error_type
    fields["error_message"] = message
    transition_logger.log(
        level,
        "job_id=%d task=%s queue=%s state=%s attempt=%d duration_ms=%s outcome=%s error=%s: %s",
        event.job_id,
        event.task,
        event.queue,
        event.to_state.value,
        event.attempt,
        duration_ms if duration_ms is not None else "-",
        outcome.value if outcome is not None else "-",
        event.error_type or "-",
        message,
        extra=fields,
    )


class Events:
    """The app's subscribers and the thread that calls them (started at the first event).

    ``publish`` never blocks and never raises. ``flush`` waits for what was published so far
    to reach every subscriber (a worker does so as it stops).
    """

    def __init__(self, *, max_queued: int = MAX_QUEUED) -> None:
        self.max_queued = max_queued
        #: events dropped because the queue was full (a slow subscriber)
        self.dropped = 0
        self._subscribers: tuple[Subscriber, ...] = (log_transition,)
        self._queue: collections.deque[Event] = collections.deque()
        self._ready = threading.Event()
        self._done = threading.Condition()
        self._published = 0
        self._delivered = 0
        self._closing = False
        self._thread: threading.Thread | None = None
        self._last_drop_log = 0.0
        self._dropped_logged = 0
        self._failures: dict[int, tuple[float, int]] = {}

    @property
    def subscribers(self) -> tuple[Subscriber, ...]:
        return self._subscribers

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback(event)`` after every transition this process commits.

        Returns a function that unsubscribes it. ``callback`` must be a plain function: it
        runs on the events thread (hand work to an event loop with
        ``loop.call_soon_threadsafe``).
        """
        if not callable(callback) or inspect.iscoroutinefunction(callback):
            raise ConfigError(
                f"an events subscriber must be a plain (not async) function of one event, got {callback!r}"
            )
        self._subscribers = (*self._subscribers, callback)

        def unsubscribe() -> None:
            self._subscribers = tuple(s for s in self._subscribers if s is not callback)

        return unsubscribe

    @property
    def active(self) -> bool:
        """Whether an event published now would reach anyone (build events only then)."""
        subscribers = self._subscribers
        if len(subscribers) == 1 and subscribers[0] is log_transition:
            return transition_logger.isEnabledFor(logging.INFO)
        return bool(subscribers)

    @property
    def failures_active(self) -> bool:
        """Whether the end of a run with an error would reach anyone: the transition log
        line logs it at WARNING or ERROR, so it is published even when INFO is off."""
        return self.active or transition_logger.isEnabledFor(logging.WARNING)

    def publish(self, event: Event) -> None:
        """Queue ``event`` for the subscribers; drop it (counted) when the queue is full."""
        queue = self._queue
        if len(queue) >= self.max_queued:
            self.dropped += 1
            self._log_drops()
            return
        self._published += 1
        queue.append(event)
        if self._thread is None:
            self._start()
        if not self._ready.is_set():
            self._ready.set()

    def flush(self, timeout_s: float) -> bool:
        """Wait until every event published so far reached the subscribers; False on timeout."""
        target = self._published
        with self._done:
            return self._done.wait_for(lambda: self._delivered >= target, timeout_s)

    def close(self, timeout_s: float = 5.0) -> None:
        """Deliver what is queued (up to ``timeout_s``) and stop the thread."""
        self.flush(timeout_s)
        self._closing = True
        self._ready.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s)

    def _start(self) -> None:
        self._closing = False
        self._thread = threading.Thread(target=self._deliver, name="akadze-events", daemon=True)
        self._thread.start()

    def _deliver(self) -> None:
        queue = self._queue
        while True:
            self._ready.wait()
            if not self._closing:
                # let a batch gather: one wake-up of this thread per batch, not per event,
                # keeps it from taking the interpreter lock from the event loop at every job
                time.sleep(GATHER_S)
            self._ready.clear()
            while queue:
                delivered = 0
                while queue and delivered < 100:
                    event = queue.popleft()
                    delivered += 1
                    for subscriber in self._subscribers:
                        try:
                            subscriber(event)
                        except Exception:
                            self._log_failure(subscriber)
                with self._done:
                    self._delivered += delivered
                    self._done.notify_all()
            if self._closing:
                return

    def _log_failure(self, subscriber: Subscriber) -> None:
        now = time.monotonic()
        logged_at, since = self._failures.get(id(subscriber), (float("-inf"), 0))
        if now - logged_at < LOG_EVERY_S:
            self._failures[id(subscriber)] = (logged_at, since + 1)
            return
        self._failures[id(subscriber)] = (now, 0)
        logger.exception(
            "events subscriber %s raised (skipped; %d more failures since last logged); "
            "transitions are not affected",
            getattr(subscriber, "__qualname__", subscriber),
            since,
        )

    def _log_drops(self) -> None:
        now = time.monotonic()
        if now - self._last_drop_log < LOG_EVERY_S:
            return
        self._last_drop_log = now
        logger.warning(
            "events: %d events dropped so far (%d since last logged): a subscriber is slower "
            "than the transitions; the queue holds %d",
            self.dropped,
            self.dropped - self._dropped_logged,
            self.max_queued,
        )
        self._dropped_logged = self.dropped
