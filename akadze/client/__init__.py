"""The runtime of generated producer clients (``akadze codegen``): RemoteTask, configure().

A producer service enqueues jobs for a worker whose code it does not import. Each generated
task class subclasses :class:`RemoteTask` and adds an ``enqueue(**kwargs: Unpack[Args])``
typed with the task's arguments. Jobs go through :func:`akadze.db.insert.insert_jobs`, the same
insert the worker-side ``task.enqueue`` uses, so the row is the same: task name, queue,
priority, max_attempts, the JSON of the arguments and the argument-schema fingerprint.

Arguments are encoded with msgspec: mirrored types (msgspec Structs, enums, NewTypes) and
datetime, UUID, Decimal (as a string), bytes (base64), sets and tuples become the JSON that
the worker's pydantic validation reads back into the declared types. A field a mirror leaves
``UNSET`` is not sent: the worker's current default applies.

Before a row is written, the guard decodes that JSON with msgspec against the task's argument
TypedDict (types, enum values, ``msgspec.Meta`` constraints, nested Structs), so an untyped
caller gets :class:`InvalidArgsError` instead of a job the worker would fail. It checks the
bytes the worker will read, so a Struct built with a wrong field type is caught too (msgspec
Structs do not check their fields when built). ``configure(validate=False)`` turns it off.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from ipaddress import IPv4Address, IPv4Interface, IPv4Network, IPv6Address, IPv6Interface, IPv6Network
from pathlib import PurePath
from typing import Any, Generic, get_args

import msgspec
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession
from typing_extensions import TypeVar

from akadze.app import create_engine
from akadze.client.guard import Constraints, Discriminator, Guard, InvalidArgsError, JsonText
from akadze.codec import DEFAULT_MAX_ARGS_BYTES
from akadze.codec.stored import MAX_JSON_DEPTH, check_payload
from akadze.db.insert import insert_jobs
from akadze.db.queries import NewJobs
from akadze.errors import ArgsTooDeepError, ConfigError, JobNotFoundError
from akadze.flow import Limit, Unique
from akadze.job import Job, JobState
from akadze.task import EnqueueOptions, Enqueuer, Session
from akadze.workflow import Call

__all__ = [
    "Call",
    "Constraints",
    "Discriminator",
    "InvalidArgsError",
    "Job",
    "JobNotFoundError",
    "JobState",
    "JsonText",
    "RemoteTask",
    "configure",
    "dispose",
    "get_job",
    "is_codegen",
    "limit_option",
    "unique_option",
    "wait_for",
]

logger = logging.getLogger("akadze.client")

#: the argument TypedDict of one task
A = TypeVar("A", bound=Mapping[str, Any])
#: the task's result type (its mirrored return type; Any for clients generated before 0.7)
R = TypeVar("R", default=Any)

#: environment variable read when neither session= nor configure() gives a database
DATABASE_URL_ENV = "AKADZE_DATABASE_URL"


def is_codegen() -> bool:
    """True while ``akadze codegen`` imports the worker app (``AKADZE_CODEGEN=1``).

    Worker modules keep import-time side effects (connections, required secrets) out of codegen
    with it, and may register under it the tasks that only some deployments register, so that
    one client package covers them all (docs/codegen.md). Never register a task *differently*
    under it (other arguments, another queue): the clients would not match the worker.
    """
    return os.environ.get("AKADZE_CODEGEN") == "1"


class _Database:
    """The producer-wide default database: configure() or AKADZE_DATABASE_URL."""

    def __init__(self) -> None:
        self.engine: AsyncEngine | None = None
        self.owned = False
        self.max_args_bytes = DEFAULT_MAX_ARGS_BYTES
        #: run the msgspec guard before inserting (configure(validate=...))
        self.validate = True

    def resolve(self) -> AsyncEngine | None:
        if self.engine is None:
            url = os.environ.get(DATABASE_URL_ENV)
            if url:
                self.engine = create_engine(url)
                self.owned = True
        return self.engine


_database = _Database()


def configure(
    *,
    engine: AsyncEngine | None = None,
    database_url: str | None = None,
    max_args_bytes: int | None = None,
    validate: bool | None = None,
) -> None:
    """Set the database used by generated clients when ``using(session=...)`` is not given.

    Pass your service's ``AsyncEngine`` (never disposed here) or a ``database_url`` (an engine
    is created and owned; close it with :func:`dispose`). Without either, the clients read
    ``AKADZE_DATABASE_URL`` on first use. ``max_args_bytes`` must match the worker app's limit
    if it changed it. ``validate=False`` turns off the argument guard (types and constraints
    checked with msgspec before the insert) for every client of the process; argument names
    are still checked. An argument left unchanged keeps its current setting.
    """
    if engine is not None and database_url is not None:
        raise ConfigError("pass engine or database_url, not both")
    if engine is not None:
        if not isinstance(engine, AsyncEngine):
            raise ConfigError(f"engine must be a SQLAlchemy AsyncEngine, got {type(engine).__qualname__}")
        _database.engine, _database.owned = engine, False
    elif database_url is not None:
        _database.engine, _database.owned = create_engine(database_url), True
    if max_args_bytes is not None:
        if isinstance(max_args_bytes, bool) or not isinstance(max_args_bytes, int):
            raise ConfigError(f"max_args_bytes must be an integer, got {max_args_bytes!r}")
        _database.max_args_bytes = max_args_bytes
    if validate is not None:
        if not isinstance(validate, bool):
            raise ConfigError(f"validate must be True or False, got {validate!r}")
        _database.validate = validate


async def dispose() -> None:
    """Close the engine that configure(database_url=...) or AKADZE_DATABASE_URL created."""
    engine, owned = _database.engine, _database.owned
    _database.engine, _database.owned = None, False
    if engine is not None and owned:
        await engine.dispose()


async def get_job(connection: Session | AsyncEngine, job_id: int) -> Job | None:
    """The job with this id as the database holds it now, or None.

    ``connection`` is your ``AsyncConnection`` or ``AsyncSession`` (the read joins its
    transaction) or an ``AsyncEngine``. The same Job the worker side returns: ``job.state``
    is a :class:`JobState`, ``job.result`` the task's JSON result once it succeeded.
    """
    from akadze.db.errors import raise_if_unreachable
    from akadze.db.queries import Queries
    from akadze.db.status import raise_if_schema_missing

    if not isinstance(connection, AsyncEngine | AsyncSession | AsyncConnection):
        raise ConfigError(
            "get_job needs a SQLAlchemy AsyncConnection, AsyncSession or AsyncEngine, "
            f"got {type(connection).__qualname__}"
        )
    try:
        if isinstance(connection, AsyncEngine):
            async with connection.connect() as conn:
                return await Queries.get_job(conn, job_id)
        if isinstance(connection, AsyncSession):
            return await Queries.get_job(await connection.connection(), job_id)
        return await Queries.get_job(connection, job_id)
    except Exception as exc:
        raise_if_schema_missing(exc)
        if isinstance(connection, AsyncEngine):
            raise_if_unreachable(exc, connection)
        raise


async def wait_for(
    job_id: int,
    *,
    timeout: timedelta | float | None = None,  # noqa: ASYNC109 (the name DESIGN §5 fixes)
    engine: AsyncEngine | None = None,
    poll_interval: timedelta = timedelta(seconds=1),
) -> Job:
    """The job once it is finished (succeeded, failed or cancelled), as ``app.wait_for``.

    Uses ``engine``, else the configured database (:func:`configure`, AKADZE_DATABASE_URL).
    Woken by a notification, with a poll every ``poll_interval`` behind it.

    Raises:
        WaitTimeoutError: the job did not finish within ``timeout`` (a timedelta or seconds):
            a TimeoutError naming the job and its state when last read.
        JobNotFoundError: no job has this id.
    """
    from akadze.waiting import wait_for as wait

    engine = engine or _database.resolve()
    if engine is None:
        raise ConfigError(
            f"wait_for: no database; pass engine=, call akadze.client.configure(engine=...), "
            f"or set {DATABASE_URL_ENV}"
        )
    return await wait(engine, job_id, timeout=timeout, poll_interval=poll_interval)


#: the Python types a mirror takes for a value that travels as its str() (docs/codegen.md)
_AS_STR = (PurePath, IPv4Address, IPv6Address, IPv4Network, IPv6Network, IPv4Interface, IPv6Interface)


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, _AS_STR):
        return str(obj)
    raise TypeError(
        f"cannot encode {type(obj).__module__}.{type(obj).__qualname__} as a task argument; "
        "pass the generated client's mirror type (or a plain value) instead"
    )


# the same options as the worker's encoder: Decimal as a string, bytes as base64
_encoder = msgspec.json.Encoder(enc_hook=_enc_hook, decimal_format="string")


class RemoteTask(Enqueuer, Generic[A, R]):
    """A task of another service, enqueued by name with typed arguments.

    Generated subclasses add ``enqueue(**kwargs: Unpack[Args]) -> Job``; ``enqueue_many``
    takes a sequence of the same TypedDict. ``using(...)`` returns a copy with options.
    ``result_of`` decodes a finished job's result to ``R``, the mirrored return type.
    """

    def __init__(
        self,
        name: str,
        *,
        queue: str,
        priority: int,
        max_attempts: int,
        args_fp: str,
        args_type: object,
        unique: Unique | None = None,
        limit: Limit | None = None,
    ) -> None:
        self.name = name
        self.queue = queue
        self.priority = priority
        self.max_attempts = max_attempts
        #: fingerprint of the worker's argument schema this client was generated from
        self.args_fp = args_fp
        self._required: frozenset[str] = getattr(args_type, "__required_keys__", frozenset())
        optional: frozenset[str] | None = getattr(args_type, "__optional_keys__", None)
        self._known = None if optional is None else self._required | optional
        # shared by the copies using() makes, so the decoder is built once per task
        self._guard = Guard(name, args_type)
        self._options = EnqueueOptions()
        #: the worker's Unique, from the manifest: the same key, so the same one job
        self.unique = unique
        #: the worker's Limit, from the manifest: a job due now is parked by its enqueue, as the
        #: worker's own enqueue parks it (docs/flow-control.md, "Parked at enqueue")
        self.limit = limit

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} queue={self.queue!r}>"

    async def result_of(
        self,
        job_or_id: Job | int,
        /,
        *,
        timeout: timedelta | float | None = None,  # noqa: ASYNC109 (the name DESIGN section 6 fixes)
    ) -> R:
        """The job's result once it has succeeded, decoded (msgspec, strictly) to the mirrored
        return type. Waits on the configured database (:func:`configure`), as :func:`wait_for`.

        Raises:
            JobFailedError: the job ended failed (its last error's type and message).
            JobCancelledError: the job ended cancelled.
            TimeoutError: it did not finish within ``timeout``.
            msgspec.ValidationError: the result is not of the type this client was generated with.
        """
        from akadze.codec.results import finished_result

        job = await wait_for(job_or_id.id if isinstance(job_or_id, Job) else job_or_id, timeout=timeout)
        result = finished_result(job)
        kind = next((get_args(base)[1:] for base in getattr(type(self), "__orig_bases__", ())), ())
        if not kind:
            return result  # type: ignore[no-any-return]  # a RemoteTask without a result type: R is Any
        value: R = msgspec.json.decode(msgspec.json.encode(result), type=kind[0], dec_hook=None)
        return value

    async def enqueue_many(self, items: Sequence[A], /) -> list[Job]:
        """Insert many jobs of this task in one statement; one bad item rejects them all."""
        payloads = [self._encode(item) for item in items]
        if not payloads:
            return []
        return await self._insert(payloads)

    def _bind(self, arguments: Mapping[str, Any], /) -> Call:
        """The generated ``bind(**kwargs)``: a step for a :class:`akadze.Workflow`, its arguments
        checked as ``enqueue`` checks them; enqueued on the configured database (or the
        workflow's ``enqueue(session=...)``)."""
        payload = self._encode(arguments)
        new: NewJobs = self._options.new_jobs(self.name, self, self.args_fp)
        return Call(self.name, new, payload, _database, lambda: (_database.resolve(), None))

    async def _enqueue(self, arguments: Mapping[str, Any], /) -> Job:
        jobs = await self._insert([self._encode(arguments)])
        return jobs[0]

    def _encode(self, arguments: Mapping[str, Any]) -> str:
        _check_keys(self.name, arguments, self._required, self._known)
        try:
            payload = _encoder.encode(arguments)
        except RecursionError:
            raise ArgsTooDeepError(self.name, MAX_JSON_DEPTH) from None
        check_payload(self.name, payload, _database.max_args_bytes)
        if _database.validate:
            self._guard.check(payload)
        return payload.decode()

    async def _insert(self, payloads: Sequence[str]) -> list[Job]:
        options = self._options
        if options.session is None:
            engine = _database.resolve()
            if engine is None:
                raise ConfigError(
                    f"task {self.name!r}: no database; pass using(session=...), call "
                    f"akadze.client.configure(engine=...), or set {DATABASE_URL_ENV}"
                )
            options = replace(options, engine=engine)
        new: NewJobs = options.new_jobs(self.name, self, self.args_fp)
        return await insert_jobs(options, new, payloads)


def limit_option(concurrency: int | None, rate: int | None, per_s: float | None, key: str | None) -> Limit:
    """The task's Limit as the manifest records it (what generated clients pass to RemoteTask)."""
    per = None if per_s is None else timedelta(seconds=per_s)
    return Limit(concurrency=concurrency, rate=rate, per=per, key=key)


def unique_option(args: list[str] | None, period_s: float | None, states: list[str]) -> Unique:
    """The task's Unique as the manifest records it (what generated clients pass to RemoteTask)."""
    period = None if period_s is None else timedelta(seconds=period_s)
    return Unique(args=None if args is None else tuple(args), period=period, states=frozenset(states))


def _check_keys(
    task: str,
    arguments: Mapping[str, Any],
    required: Collection[str],
    known: Collection[str] | None,
) -> None:
    """A cheap guard for untyped callers; types are mypy's job and the worker's validation."""
    if not isinstance(arguments, Mapping):
        raise TypeError(f"task {task!r}: arguments must be a mapping, got {type(arguments).__name__}")
    unknown = [] if known is None else sorted(key for key in arguments if key not in known)
    if unknown:
        raise TypeError(f"task {task!r}: unexpected argument(s) {', '.join(map(repr, unknown))}")
    missing = sorted(key for key in required if key not in arguments)
    if missing:
        raise TypeError(f"task {task!r}: missing required argument(s) {', '.join(map(repr, missing))}")
