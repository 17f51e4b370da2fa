"""Akadze: the engine it owns or borrows, the task registry, include/register, hooks, schedules."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import logging
import os
from collections.abc import Callable, Iterable
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from sqlalchemy.ext.asyncio import AsyncEngine
from typing_extensions import Unpack

from akadze import flow
from akadze.codec import DEFAULT_MAX_ARGS_BYTES, build_codec
from akadze.codec.jsontypes import warn_if_result_not_json
from akadze.db.engines import DEFAULT_POOL_SIZE, create_engine, normalize_url, read_engine_for
from akadze.db.errors import raise_if_unreachable
from akadze.db.migrate import migrate as _migrate
from akadze.db.queries import Queries
from akadze.db.raw import RawConnections
from akadze.errors import ConfigError, DuplicateTaskError, MissingRegisterError, UnknownTaskError
from akadze.events import Accept, Events, Kind, Subscriber, logs, tracing
from akadze.hooks import Hooks
from akadze.job import Job, check_name
from akadze.task import Task, TaskOptionArgs, TaskOptions

if TYPE_CHECKING:
    from akadze.schedule import Schedule

P = ParamSpec("P")
R = TypeVar("R")

logger = logging.getLogger("akadze.app")

#: where ``Akadze()`` finds its database when given neither a URL nor an engine
DATABASE_URL_ENV = "AKADZE_DATABASE_URL"

__all__ = ["Akadze", "Hooks", "create_engine", "normalize_url"]


class Akadze:
    """The application: engine, tasks, hooks and schedules. There is no global instance.

    Args:
        database_url: the app creates its own engine from it and owns (disposes) it. Without
            it (and without ``engine``), the app reads ``AKADZE_DATABASE_URL``.
        engine: your own AsyncEngine, shared with the rest of your service; never disposed here.
        pool_size: size of the pool created from database_url (plus 10 overflow).
        grace: how late a periodic run may still be put in the queue.
        retention: finished jobs and schedule runs older than this are deleted by the worker.
        prepared_statements: keep prepared statements on the connections of the engine created
            from database_url (faster; not behind a pooler in transaction mode). Default False.
        read_database_url / read_engine: a streaming replica (at most one of the two) that
            serves what only reads: job listings, ``jobs explain``, ``queues list``, ``workers
            list``, the dashboard's pages, the metrics gauges. Every write, and every read that
            must see the app's own writes (get_job, wait_for, a worker's reads), goes to the
            primary. The engine built from read_database_url is the app's (disposed with it).
    """

    def __init__(
        self,
        database_url: str | None = None,
        *,
        engine: AsyncEngine | None = None,
        pool_size: int | None = None,
        grace: timedelta = timedelta(minutes=1),
        retention: timedelta = timedelta(days=7),
        max_args_bytes: int = DEFAULT_MAX_ARGS_BYTES,
        prepared_statements: bool = False,
        read_database_url: str | None = None,
        read_engine: AsyncEngine | None = None,
    ) -> None:
        if database_url is None and engine is None:
            database_url = os.environ.get(DATABASE_URL_ENV) or None
            if database_url is None:
                raise ConfigError(f"pass database_url or engine, or set {DATABASE_URL_ENV}")
        if database_url is not None and engine is not None:
            raise ConfigError("pass exactly one of database_url or engine")
        if engine is not None and pool_size is not None:
            raise ConfigError(
                "pool_size applies to the engine created from database_url; "
                "size your own engine's pool yourself"
            )
        if engine is not None and prepared_statements:
            raise ConfigError(
                "prepared_statements applies to the engine created from database_url; configure "
                "your own engine's statement cache yourself"
            )
        if not isinstance(prepared_statements, bool):
            raise ConfigError(f"prepared_statements must be True or False, got {prepared_statements!r}")
        if pool_size is not None and (
            isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1
        ):
            raise ConfigError(f"pool_size must be an integer of 1 or more, got {pool_size!r}")
        for label, value in (("grace", grace), ("retention", retention)):
            if not isinstance(value, timedelta) or value <= timedelta(0):
                raise ConfigError(f"{label} must be a positive timedelta, got {value!r}")
        if grace >= retention:
            raise ConfigError(
                f"grace ({grace}) must be shorter than retention ({retention}): schedule runs "
                "are the record that keeps a fire time from being enqueued twice"
            )
        if engine is not None:
            if not isinstance(engine, AsyncEngine):
                raise ConfigError(f"engine must be a SQLAlchemy AsyncEngine, got {type(engine).__qualname__}")
            self._engine = engine
            self._owns_engine = False
        else:
            assert database_url is not None
            self._engine = create_engine(
                database_url,
                pool_size=pool_size or DEFAULT_POOL_SIZE,
                prepared_statements=prepared_statements,
            )
            self._owns_engine = True
        self._read_engine, self._owns_read_engine = read_engine_for(
            read_database_url,
            read_engine,
            pool_size=pool_size or DEFAULT_POOL_SIZE,
            prepared_statements=prepared_statements,
        )
        self.raw_connections = RawConnections(self._engine, keep=2 if self._owns_engine else 0)
        self.grace = grace
        self.retention = retention
        self.max_args_bytes = max_args_bytes
        self.hooks = Hooks()
        #: the subscribers to this process's committed transitions; see subscribe(). The
        #: transition log line and traces attach like any subscriber, each taking events only
        #: while its own switch is on (the logger's level; a tracer provider)
        self.events = Events()
        logs.attach(self.events)
        tracing.attach(self.events)
        self.tasks: dict[str, Task[Any, Any]] = {}
        self.schedules: dict[str, Schedule] = {}
        #: modules included, in order
        self.included: list[str] = []
        self._including: str | None = None

    def __repr__(self) -> str:
        return f"<Akadze tasks={len(self.tasks)} engine={self._engine.url.render_as_string()!r}>"

    @property
    def engine(self) -> AsyncEngine:
        """The app's engine: the one it created from ``database_url`` or the one it was given. Every
        write goes here; reads that may lag go to ``read_engine``."""
        return self._engine

    @property
    def owns_engine(self) -> bool:
        """True when the app created its engine from ``database_url``: ``dispose()`` then closes it,
        and the app keeps spare raw connections for enqueues. A borrowed engine is left to its owner."""
        return self._owns_engine

    @property
    def read_engine(self) -> AsyncEngine:
        """Where what only reads goes: the replica's engine, or the app's own without one."""
        return self._read_engine or self._engine

    def subscribe(
        self, callback: Subscriber, *, kinds: Iterable[Kind] | None = None, accept: Accept | None = None
    ) -> Callable[[], None]:
        """Call ``callback(event)`` after every job transition this process commits.

        A worker publishes claims, run ends, ``complete_tx`` commits, rescues and schedule
        fires; ``request_cancel``/``requeue`` publish when given ``app=``. ``callback`` is a
        plain function of one :class:`akadze.events.Event` (never arguments or results), run
        on a thread of its own, outside every transaction: one that raises is logged and
        skipped, one that is slow makes later events drop (``app.events.dropped``); neither
        delays a transition. ``kinds``/``accept`` narrow what it takes (Events.subscribe).
        Returns a function that unsubscribes it; docs/events.md has an example.
        """
        return self.events.subscribe(callback, kinds=kinds, accept=accept)

    async def dispose(self) -> None:
        """Close the engine if the app created it; a borrowed engine is left alone."""
        await asyncio.to_thread(self.events.close)
        await self.raw_connections.close()
        if self._owns_read_engine and self._read_engine is not None:
            await self._read_engine.dispose()
        if self._owns_engine:
            await self._engine.dispose()

    async def __aenter__(self) -> Akadze:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.dispose()

    async def migrate(self) -> list[int]:
        """Create or upgrade the schema; idempotent and safe from several processes at once."""
        try:
            return await _migrate(self._engine)
        except Exception as exc:
            raise_if_unreachable(exc, self._engine)
            raise

    # -- tasks -----------------------------------------------------------------------------

    def task(self, name: str, **options: Unpack[TaskOptionArgs]) -> Callable[[Callable[P, R]], Task[P, R]]:
        """Declare a task. Example: ``@app.task("mail.send", queue="mail")``.

        Options (akadze.task.TaskOptions holds their defaults): ``queue`` ("default"),
        ``max_attempts`` (3), ``timeout`` (None), ``priority`` (0), ``backoff`` (None: the
        default curve), ``unknown_args`` ("forbid"), ``retry_priority`` (None: a retried job
        keeps its priority; docs/worker.md, retry herds). ``unknown_args="ignore"`` runs a job
        whose stored arguments include some the task does not declare (a producer deployed
        before the worker), without them, where the default ``"forbid"`` fails it; enqueue
        refuses unknown arguments either way.
        """
        check_name("task", name)
        task_options = TaskOptions.of(name, options)
        if name in self.tasks:
            raise DuplicateTaskError(name)

        def decorate(fn: Callable[P, R]) -> Task[P, R]:
            return self._add(fn, name, task_options)

        return decorate

    def register(self, fn: Callable[P, R], *, name: str, **options: Unpack[TaskOptionArgs]) -> Task[P, R]:
        """Register a plain function (a closure over your dependencies, say) as a task; the
        options are app.task's."""
        check_name("task", name)
        return self._add(fn, name, TaskOptions.of(name, options))

    def _add(self, fn: Callable[P, R], name: str, options: TaskOptions) -> Task[P, R]:
        if not callable(fn):
            raise ConfigError(f"task {name!r}: {fn!r} is not callable")
        if name in self.tasks:
            raise DuplicateTaskError(name)
        codec = build_codec(name, fn, max_bytes=self.max_args_bytes)
        if options.unique is not None or options.limit is not None:
            options = flow.checked(name, options, fn, codec.signature)
        task = Task(self, fn, name, options, codec, self._including)
        if not task.is_async and options.timeout is not None:
            logger.warning(
                "task %r is synchronous and has a timeout: a timeout does not stop its thread; "
                "the run counts as an error, a retry may start while the old thread still works, "
                "and that thread no longer counts in slots. Give the task its own deadline.",
                name,
            )
        warn_if_result_not_json(logger, name, task.result_type.annotation)
        self.tasks[name] = task
        return task

    def include(self, module: str) -> None:
        """Import ``module`` and call its ``register(app)``; including a module twice is a no-op."""
        if module in self.included:
            return
        imported = importlib.import_module(module)
        register = getattr(imported, "register", None)
        if register is None or not callable(register):
            raise MissingRegisterError(module)
        outer, self._including = self._including, module
        try:
            register(self)
        finally:
            self._including = outer
        self.included.append(module)

    def get_task(self, name: str) -> Task[Any, Any]:
        """The registered task named ``name``; UnknownTaskError when this app has none (an app that
        did not include the module that registers it, say)."""
        try:
            return self.tasks[name]
        except KeyError:
            raise UnknownTaskError(name) from None

    def queues(self) -> list[str]:
        """Every queue that a registered task uses by default, sorted."""
        return sorted({task.options.queue for task in self.tasks.values()})

    async def pause_queue(self, name: str) -> bool:
        """Stop every worker claiming from queue ``name`` (persisted; running jobs finish,
        enqueue still works). Idempotent; returns True when it was not paused before."""
        from akadze.control.queues import pause_queue

        return await pause_queue(self, name)

    async def resume_queue(self, name: str) -> bool:
        """Let workers claim from queue ``name`` again, waking them at once. Idempotent;
        returns True when it was paused before."""
        from akadze.control.queues import resume_queue

        return await resume_queue(self, name)

    # -- jobs ------------------------------------------------------------------------------

    async def get_job(self, job_id: int) -> Job | None:
        """The job with this id as the database holds it now, or None.

        Raises:
            DatabaseUnreachableError: no connection to the database could be made.
        """
        try:
            async with self._engine.connect() as conn:
                return await Queries.get_job(conn, job_id)
        except Exception as exc:
            raise_if_unreachable(exc, self._engine)
            raise

    async def get_workflow(self, workflow_id: int) -> dict[str, Job]:
        """A workflow's steps by step name, as stored now ({} if none: unknown, or pruned)."""
        async with self._engine.connect() as conn:
            return await Queries.get_workflow(conn, workflow_id)

    async def wait_for(
        self,
        job_id: int,
        timeout: timedelta | float | None = None,  # noqa: ASYNC109 (the name DESIGN §5 fixes)
        *,
        poll_interval: timedelta = timedelta(seconds=1),
    ) -> Job:
        """The job once it is finished (succeeded, failed or cancelled).

        Woken by a notification when the job finishes, with a poll every ``poll_interval``
        behind it (notifications do not pass a pooler in transaction mode). ``timeout`` is a
        timedelta or seconds; None waits for good. Holds no connection per waiter: the waiters
        of a process share one.

        Raises:
            WaitTimeoutError: the job did not finish within ``timeout`` (a TimeoutError naming
                the job and its state when last read).
            JobNotFoundError: no job has this id.
            DatabaseUnreachableError: no connection to the database could be made.
        """
        from akadze.waiting import wait_for

        return await wait_for(self._engine, job_id, timeout=timeout, poll_interval=poll_interval)

    # -- schedules -------------------------------------------------------------------------

    def schedule(
        self,
        name: str,
        task: Task[Any, Any],
        *,
        cron: str | None = None,
        every: timedelta | None = None,
        args: dict[str, Any] | None = None,
        tz: str | None = None,
    ) -> Schedule:
        """Run an existing task on a schedule (exactly one of cron or every) with fixed args."""
        from akadze.schedule import Schedule

        if name in self.schedules:
            raise ConfigError(f"schedule {name!r} is already registered")
        if not isinstance(task, Task) or self.tasks.get(task.name) is not task:
            raise ConfigError(f"schedule {name!r}: {task!r} is not a task of this app")
        sched = Schedule.create(name, task, cron=cron, every=every, args=args or {}, tz=tz)
        self.schedules[name] = sched
        return sched

    def periodic(
        self,
        name: str,
        *,
        cron: str | None = None,
        every: timedelta | None = None,
        tz: str | None = None,
        **options: Unpack[TaskOptionArgs],
    ) -> Callable[[Callable[[], R]], Task[[], R]]:
        """Declare a task without arguments and its schedule (named like the task) in one step;
        the options are app.task's."""
        check_name("task", name)
        task_options = TaskOptions.of(name, options)
        if name in self.tasks:
            raise DuplicateTaskError(name)

        def decorate(fn: Callable[[], R]) -> Task[[], R]:
            if inspect.signature(fn).parameters:
                raise ConfigError(f"periodic task {name!r} must take no arguments")
            task = self._add(fn, name, task_options)
            try:
                self.schedule(name, task, cron=cron, every=every, tz=tz)
            except Exception:
                del self.tasks[name]
                raise
            return task

        return decorate
