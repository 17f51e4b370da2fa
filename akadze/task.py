"""Task: a registered function with its options, and enqueue / enqueue_many / using(...).

Two types carry a task's options: :class:`TaskOptions` (fixed at registration: queue, attempts,
timeout, ...; as keyword arguments, :class:`TaskOptionArgs`) and :class:`EnqueueOptions` (given
to ``using(...)`` per enqueue: session, delay, run_at, ...). ``db.queries.NewJobs`` is the two
resolved into the columns of the rows to insert.
"""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta
from typing import (
    TYPE_CHECKING,
    Any,
    Generic,
    ParamSpec,
    Protocol,
    Self,
    TypeAlias,
    TypedDict,
    TypeVar,
    overload,
)

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from akadze.backoff import BackoffPolicy
from akadze.codec import UNKNOWN_ARGS_POLICIES, ArgsCodec, UnknownArgs
from akadze.codec.batch import encode_many
from akadze.codec.results import ResultType, finished_result
from akadze.db.insert import insert_jobs
from akadze.db.queries import NewJobs
from akadze.db.raw import RawConnections
from akadze.errors import ConfigError
from akadze.flow import Limit, Unique
from akadze.job import Job, check_name
from akadze.workflow import Call

if TYPE_CHECKING:
    from akadze.app import Akadze

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

#: what an async task returns: result_of decodes to T
Awaited: TypeAlias = Coroutine[Any, Any, T]
#: how long result_of waits: a timedelta, seconds, or None (no limit)
Wait: TypeAlias = timedelta | float | None
#: what session= accepts: the caller's transaction
Session: TypeAlias = AsyncConnection | AsyncSession


class TaskOptionArgs(TypedDict, total=False):
    """The options of ``app.task``, ``app.register`` and ``app.periodic`` as keyword arguments:
    the fields of :class:`TaskOptions`, which holds their defaults and checks."""

    queue: str
    max_attempts: int
    timeout: timedelta | None
    priority: int
    backoff: BackoffPolicy | None
    unknown_args: UnknownArgs
    unique: Unique | None
    limit: Limit | None
    retry_priority: int | None


@dataclass(frozen=True, slots=True)
class TaskOptions:
    """A task's options, fixed at registration (the one definition behind app.task,
    app.register and app.periodic)."""

    queue: str = "default"
    max_attempts: int = 3
    timeout: timedelta | None = None
    priority: int = 0
    backoff: BackoffPolicy | None = None
    #: stored arguments the task does not declare, at run time: fail the job, or drop them
    unknown_args: UnknownArgs = "forbid"
    #: one job per key (akadze.flow; checked against the signature at registration)
    unique: Unique | None = None
    #: concurrency and rate across workers, enforced at claim (akadze.flow)
    limit: Limit | None = None
    #: the priority a job takes when a failed run is retried (None keeps its own): below the
    #: task's priority, fresh work in the queue goes before a herd of due retries
    retry_priority: int | None = None

    def __post_init__(self) -> None:
        check_name("queue", self.queue)
        if (
            isinstance(self.max_attempts, bool)
            or not isinstance(self.max_attempts, int)
            or self.max_attempts < 1
        ):
            raise ConfigError(f"max_attempts must be an integer of 1 or more, got {self.max_attempts!r}")
        if self.timeout is not None and (
            not isinstance(self.timeout, timedelta) or self.timeout <= timedelta(0)
        ):
            raise ConfigError(f"timeout must be a positive timedelta or None, got {self.timeout!r}")
        _check_priority(self.priority)
        if self.retry_priority is not None:
            _check_priority(self.retry_priority, "retry_priority")
        if self.backoff is not None and (
            not callable(self.backoff) or inspect.iscoroutinefunction(self.backoff)
        ):
            raise ConfigError("backoff must be a plain (not async) function attempt -> timedelta")
        if self.unknown_args not in UNKNOWN_ARGS_POLICIES:
            raise ConfigError(f"unknown_args must be 'forbid' or 'ignore', got {self.unknown_args!r}")

    @classmethod
    def of(cls, task_name: str, options: Mapping[str, Any]) -> TaskOptions:
        """The options given to app.task / app.register / app.periodic, checked."""
        unknown = sorted(set(options) - _OPTION_NAMES)
        if unknown:
            raise ConfigError(
                f"task {task_name!r}: unknown option(s) {', '.join(map(repr, unknown))}; "
                f"the options are {', '.join(sorted(_OPTION_NAMES))}"
            )
        return cls(**options)


_OPTION_NAMES = frozenset(field.name for field in fields(TaskOptions))


def _check_priority(priority: object, label: str = "priority") -> None:
    if isinstance(priority, bool) or not isinstance(priority, int) or not -(2**31) <= priority < 2**31:
        raise ConfigError(f"{label} must be a 32-bit integer, got {priority!r}")


class Enqueuer:
    """What every task handle shares (a registered Task, a generated client's RemoteTask):
    ``using(...)`` returns a copy that enqueues with those options."""

    _options: EnqueueOptions

    def using(
        self,
        *,
        session: Session | None = None,
        delay: timedelta | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
        queue: str | None = None,
        expires_at: datetime | None = None,
    ) -> Self:
        """Options for the jobs enqueued next; ``session`` joins the caller's transaction.

        ``session`` is a SQLAlchemy ``AsyncConnection`` or ``AsyncSession``: the jobs commit or
        roll back with it. ``priority`` and ``queue`` override the task's defaults; ``delay``
        or ``run_at`` (aware) delays the jobs; ``expires_at`` cancels them if not started by
        then. Options given again replace the earlier ones.
        """
        clone = copy.copy(self)
        clone._options = self._options.merged(
            session=session,
            delay=delay,
            run_at=run_at,
            priority=priority,
            queue=queue,
            expires_at=expires_at,
        )
        clone._forget()
        return clone

    def _forget(self) -> None:
        """Drop what a copy must build again for its own options."""


class Task(Enqueuer, Generic[P, R]):
    """A registered task. Call it to run the function in-process; enqueue it to make a job.

    ``enqueue`` is typed with the function's parameters, so mypy rejects a wrong argument
    name or type.
    """

    def __init__(
        self,
        app: Akadze,
        fn: Callable[P, R],
        name: str,
        options: TaskOptions,
        codec: ArgsCodec,
        module: str | None,
    ) -> None:
        self.app = app
        self.fn = fn
        self.name = name
        self.options = options
        self.codec = codec
        #: the included module that registered this task (None outside include())
        self.module = module
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
            getattr(fn, "__call__", None)  # noqa: B004 (async callable instances)
        )
        self.args_fp = codec.fingerprint
        self._options = EnqueueOptions()
        #: the using() options with the app's engine, and the rows' columns, built once
        self._bound: EnqueueOptions | None = None
        self._new: NewJobs | None = None
        #: the declared return type: how result_of decodes a result
        self.result_type = ResultType(fn)

    def __repr__(self) -> str:
        return f"<Task {self.name!r} queue={self.options.queue!r}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    @property
    def queue(self) -> str:
        """The queue this task's jobs go to unless ``using(queue=...)`` says otherwise."""
        return self.options.queue

    async def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Job:
        """Validate the arguments and insert one job (pydantic.ValidationError if invalid)."""
        codec = self.codec
        payload = codec.encode(codec.bind(args, kwargs))
        jobs = await insert_jobs(self._with_engine(), self._new_jobs(), [payload], self.app.hooks.on_enqueue)
        return jobs[0]

    @overload
    async def result_of(self: Task[P, Awaited[T]], job_or_id: Job | int, *, timeout: Wait = None) -> T:  # noqa: ASYNC109
        """An async task's result is what its coroutine returns, not the coroutine."""

    @overload
    async def result_of(self: Task[P, T], job_or_id: Job | int, *, timeout: Wait = None) -> T:  # noqa: ASYNC109
        """A sync task's result is what it returns."""

    async def result_of(self, job_or_id: Job | int, *, timeout: Wait = None) -> Any:  # noqa: ASYNC109 (DESIGN §6)
        """The job's result once it has succeeded, decoded to the task's declared return type
        (waiting as ``app.wait_for`` does).

        Raises:
            JobFailedError: the job ended failed (its last error's type and message).
            JobCancelledError: the job ended cancelled.
            TimeoutError: it did not finish within ``timeout`` (a timedelta or seconds).
            pydantic.ValidationError: the stored result is not of the declared type.
        """
        done = await self.app.wait_for(
            job_or_id.id if isinstance(job_or_id, Job) else job_or_id, timeout=timeout
        )
        return self.result_type.decode(finished_result(done))

    def bind(self, *args: P.args, **kwargs: P.kwargs) -> Call:
        """This task with these arguments (validated as ``enqueue`` validates them, else
        pydantic.ValidationError) and the ``using(...)`` options: a step of a Workflow."""
        app, payload = self.app, self.codec.encode(self.codec.bind(args, kwargs))
        placement = functools.partial(_placement, app)
        return Call(self.name, self._new_jobs(), payload, app, placement, tuple(app.hooks.on_enqueue))

    async def enqueue_many(self, items: Iterable[Mapping[str, Any]]) -> list[Job]:
        """Insert many jobs of this task in one round trip; one invalid item rejects them all."""
        payloads = encode_many(self.codec, items)
        if not payloads:
            return []
        return await insert_jobs(self._with_engine(), self._new_jobs(), payloads, self.app.hooks.on_enqueue)

    def _forget(self) -> None:
        self._bound = self._new = None

    def _with_engine(self) -> EnqueueOptions:
        # the app's engine is read at each enqueue (akadze.testing.bound swaps it for a block)
        bound = self._bound
        if bound is None or bound.engine is not self.app.engine:
            bound = self._bound = replace(self._options, engine=self.app.engine, raw=self.app.raw_connections)
        return bound

    def _new_jobs(self) -> NewJobs:
        new = self._new
        if new is None:
            new = self._new = self._options.new_jobs(self.name, self.options, self.args_fp)
        return new


def _placement(app: Akadze) -> tuple[AsyncEngine, RawConnections]:
    return app.engine, app.raw_connections


class JobDefaults(Protocol):
    """A task's own placement of its jobs, which ``using(...)`` may override: a worker-side
    task's :class:`TaskOptions`, or a generated client's task itself."""

    @property
    def queue(self) -> str:
        """The queue the jobs go to."""

    @property
    def priority(self) -> int:
        """The jobs' priority."""

    @property
    def max_attempts(self) -> int:
        """Runs a job may take."""

    @property
    def unique(self) -> Unique | None:
        """One job per key, or None."""

    @property
    def limit(self) -> Limit | None:
        """The task's Limit when the producer knows it (a due job is then parked at enqueue)."""


@dataclass(frozen=True, slots=True)
class EnqueueOptions:
    """Where and when the next jobs go: the options of ``using(...)``."""

    #: where jobs go without a session (resolved at enqueue: the app's, or the client's)
    engine: AsyncEngine | None = None
    session: Session | None = None
    delay: timedelta | None = None
    run_at: datetime | None = None
    priority: int | None = None
    queue: str | None = None
    expires_at: datetime | None = None
    #: where autocommit inserts get their connection (the app's, which keeps spares)
    raw: RawConnections | None = None

    def merged(self, **options: Any) -> EnqueueOptions:
        """These options with every non-None keyword replacing its field, checked (ConfigError for a
        bad value); ``using(...)`` builds its clone's options with it."""
        changes = {key: value for key, value in options.items() if value is not None}
        merged = replace(self, **changes)
        merged.check()
        return merged

    def check(self) -> None:
        """Raise ConfigError for an option an enqueue cannot use: a session of the wrong type, a
        negative delay, delay with run_at, a naive datetime, a bad priority or queue name."""
        if self.session is not None and not isinstance(self.session, AsyncConnection | AsyncSession):
            raise ConfigError(
                "session must be a SQLAlchemy AsyncConnection or AsyncSession, "
                f"got {type(self.session).__qualname__}"
            )
        if self.delay is not None:
            if not isinstance(self.delay, timedelta):
                raise ConfigError(f"delay must be a timedelta, got {self.delay!r}")
            if self.delay < timedelta(0):
                raise ConfigError(f"delay must not be negative, got {self.delay}")
        if self.delay is not None and self.run_at is not None:
            raise ConfigError("pass delay or run_at, not both")
        for label, moment in (("run_at", self.run_at), ("expires_at", self.expires_at)):
            if moment is not None and (not isinstance(moment, datetime) or moment.tzinfo is None):
                raise ConfigError(f"{label} must be a timezone-aware datetime, got {moment!r}")
        if self.priority is not None:
            _check_priority(self.priority)
        if self.queue is not None:
            check_name("queue", self.queue)

    def new_jobs(self, task: str, defaults: JobDefaults, args_fp: str | None) -> NewJobs:
        """The fixed part of the rows these options write for ``task``: the queue and priority given
        here win over the task's own ``defaults``, and delay or run_at say when the jobs become
        ready."""
        return NewJobs(
            task=task,
            queue=self.queue or defaults.queue,
            priority=self.priority if self.priority is not None else defaults.priority,
            max_attempts=defaults.max_attempts,
            args_fp=args_fp,
            run_at=self.run_at,
            delay_s=self.delay.total_seconds() if self.delay is not None else 0.0,
            expires_at=self.expires_at,
            unique=defaults.unique,
            limit=defaults.limit,
        )
