"""Library errors. Outcomes raised by task code (Retry, Snooze, Fail, Cancel) live in outcomes.py.

Every public exception of akadze is defined here and drawn below; the modules that raise them
re-export them where users met them first (akadze.codec.drift, akadze.client, akadze.embedded).

AkadzeError
├── ConfigError (ValueError)            bad Akadze(...) or task options
│   └── AppLoadError                    an app path (module:attr) that cannot be loaded
├── DuplicateTaskError (ValueError)     a task name registered twice
├── MissingRegisterError (ImportError)  app.include() on a module without register(app)
├── UnknownTaskError (LookupError)      a job names a task this app does not know
├── NotInRunError (RuntimeError)        current() outside a run
├── LostOwnershipError                  complete_tx() after the job was rescued
├── MigrationEditedError                an applied migration's shipped file was edited
├── ArgsTooLargeError (ValueError)      encoded arguments over the size limit
├── ArgsTooDeepError (ValueError)       arguments nested deeper than the worker decodes
├── UndecodableJobError                 a stored job whose arguments cannot be decoded
├── ResultNotJson (TypeError)           a task returned a value that is not JSON
├── UnrunnableArgsError (ValueError)    a job's stored arguments can never run: it fails at once
│   ├── ArgsSchemaMismatch              they were built against another schema of the task
│   └── ArgsRefusedError                the task's validation refuses them (a validator, a bound)
├── JobFailedError                      result_of: the job ended failed (its last error's type)
├── JobCancelledError                   result_of: the job ended cancelled
│   └── DependencyFailed                result_of: a step cancelled since a step it waits for failed
├── WorkflowError (ValueError)          a workflow that cannot be enqueued: nothing was inserted
├── InvalidArgsError (ValueError)       a generated client refused the arguments
├── JobNotFoundError (LookupError)      wait_for on a job id that does not exist
├── WaitTimeoutError (TimeoutError)     wait_for: the job did not finish in time (its id and state)
├── DatabaseUnreachableError (ConnectionError) no connection to the database at the URL's address
├── SchemaMissingError                  the database has no akadze schema: run akadze db migrate
├── SchemaVersionError                  the schema is older than this code: run akadze db migrate
├── ForwardOnlyError                    an Alembic downgrade of akadze's schema (migrations are forward-only)
├── UniqueConflictError                 requeue refused: a newer job holds the job's unique key
├── UniqueRaceError                     a unique enqueue lost every round of a rare race
└── EmbeddedPostgresError (RuntimeError) the embedded dev PostgreSQL failed

akadze_codegen.problems.AkadzeCodegenError (not an AkadzeError: rendering from a manifest never
imports akadze, whose package loads pydantic)
├── CodegenError                        generation stopped; ``problems`` lists every problem
└── ManifestInputError                  a manifest cannot be read (akadze_codegen.diff)
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from typing import Any, ClassVar, dataclass_transform


@dataclass_transform(eq_default=False)
class AkadzeError(Exception):
    """Base of every error the library raises (not of task outcomes).

    A subclass declares the values that caused it as annotated fields, and its message as
    ``template``, formatted with them; its constructor takes the fields in order (a dataclass's).
    A subclass declared with ``init=False`` takes its message as it is.
    """

    #: the message, ``str.format``-ed with the error's fields
    template: ClassVar[str] = ""

    def __init_subclass__(cls, *, init: bool = True, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if init:
            # eq=False keeps exceptions hashable by identity; repr=False keeps Exception's repr
            dataclass(eq=False, repr=False)(cls)

    def __post_init__(self) -> None:
        Exception.__init__(self, self.describe())

    def describe(self) -> str:
        """The message: ``template`` with the fields filled in."""
        return self.template.format_map(vars(self))


class ConfigError(AkadzeError, ValueError, init=False):
    """Bad configuration: the message says which value and how to fix it."""


class AppLoadError(ConfigError):
    """The app named by ``app_path`` (module:attr) cannot be loaded; the message says why.

    ``raised_by_app``: the app's own import or factory raised (the exception is the cause).
    """

    app_path: str
    message: str
    _: KW_ONLY
    raised_by_app: bool = False
    template = "{message}"


class DuplicateTaskError(AkadzeError, ValueError):
    """Raised by app.task(), app.register() and app.periodic() (so also inside app.include())
    when the name is already registered in this app; the first task stays. Rename one of them."""

    task_name: str
    template = "task {task_name!r} is already registered"


class MissingRegisterError(AkadzeError, ImportError):
    """Raised by app.include() when the imported module has no callable ``register(app)``;
    no task of it is registered. Add the function, or include the module that has it."""

    module: str
    template = "module {module!r} has no register(app) function"


class UnknownTaskError(AkadzeError, LookupError):
    """Raised by app.get_task() for a name this app does not register; a worker that claims a
    job of such a task ends the run with this error (the job retries on its attempts)."""

    task_name: str
    template = "no task named {task_name!r} is registered in this app"


class NotInRunError(AkadzeError, RuntimeError):
    """Raised by current() outside a running task (a thread or task spawned without the run's
    context included): there is no run, so no complete_tx() either. Call it from task code."""

    template = "current() is only available inside a running task"


class LostOwnershipError(AkadzeError):
    """The run no longer owns its job: another worker rescued it. Writes were rolled back."""

    job_id: int
    run: int
    template = (
        "job {job_id} is no longer owned by this run (run {run}): "
        "it was rescued by another worker; the writes of this block were rolled back"
    )


class MigrationEditedError(AkadzeError):
    """A migration the database has applied no longer matches its shipped file: migrating stops."""

    file_name: str
    _: KW_ONLY
    recorded: str
    shipped: str
    template = (
        "migration {file_name} was applied with checksum {recorded:.12} but the shipped file "
        "has {shipped:.12}: a shipped migration was edited; restore it and put the change "
        "in a new migration"
    )


class ArgsTooLargeError(AkadzeError, ValueError):
    """Raised at enqueue when the encoded arguments exceed the app's ``max_args_bytes``; no row
    is written. Store the payload elsewhere and pass a reference (or raise the limit)."""

    task_name: str
    size: int
    limit: int
    template = (
        "arguments of task {task_name!r} encode to {size} bytes, over the limit of {limit}; "
        "store large payloads elsewhere and pass a reference"
    )


class ArgsTooDeepError(AkadzeError, ValueError):
    """Raised at enqueue when the arguments nest deeper than MAX_JSON_DEPTH, which a worker
    could not decode; no row is written. Flatten the value or store it elsewhere."""

    task_name: str
    limit: int
    template = (
        "arguments of task {task_name!r} nest deeper than the limit of {limit} levels, "
        "which a worker could not decode; flatten them or store them elsewhere"
    )


class UndecodableJobError(AkadzeError):
    """A claimed job whose stored arguments cannot be decoded (a row from another producer):
    it ends failed without running. The message names the job and the reason, not the value."""

    job_id: int
    reason: str
    template = "job {job_id} cannot run: {reason}"


class ResultNotJson(AkadzeError, TypeError):
    """A task returned a value that is not plain JSON; the run counts as an error."""

    type_name: str
    path: str = "$"
    template = (
        "task result is not JSON: {type_name} at {path} (return dict, list, str, int, float, bool or None)"
    )


class UnrunnableArgsError(AkadzeError, ValueError, init=False):
    """A job's stored arguments do not decode, and no retry can change that: the job fails at
    once, with one attempt spent (akadze.codec.drift decides which subclass)."""


class ArgsRefusedError(UnrunnableArgsError):
    """The task's own validation refuses a job's arguments (a validator the producer's client
    cannot run, a date that must be in the future, a value a producer wrote by hand).

    Built against the worker's own schema, so no regeneration helps either: the job fails at
    once. ``details`` names the fields and the problems, never the values.
    """

    task_name: str
    #: where validation failed, as dotted paths ("to.zipCode"); "(arguments)" for the top
    fields: list[str]
    details: str
    template = "task {task_name!r}: its arguments do not validate, and never will: {details}"


class JobFailedError(AkadzeError):
    """``result_of``: the job ended failed, so it has no result. ``error_type`` and ``message``
    are its last error's (None if it has none)."""

    job_id: int
    task_name: str
    error_type: str | None
    message: str | None
    template = "job {job_id} of task {task_name!r} failed: {error_type}: {message}"


class JobCancelledError(AkadzeError):
    """``result_of``: the job ended cancelled, so it has no result."""

    job_id: int
    task_name: str
    template = "job {job_id} of task {task_name!r} was cancelled"


class DependencyFailed(JobCancelledError):
    """A workflow step ended cancelled without running: a step it waits for (``dependency``)
    ended failed or cancelled (docs/workflows.md). Its error entry's type is
    ``akadze.DependencyFailed``; ``result_of`` raises this for such a step."""

    #: the error entry's message: which step it waited for, and how that step ended
    message: str
    template = "job {job_id} of task {task_name!r} was cancelled: {message}"


class WorkflowError(AkadzeError, ValueError):
    """A workflow that cannot be enqueued (an unknown step name, a cycle, a duplicate step, a
    step of another app's task, too many steps): raised before anything is inserted; or a
    requeue of a step in a transaction that cannot take back the steps after it safely (not
    READ COMMITTED): raised before they are changed."""

    step: str | None
    message: str
    template = "{message}"


class ArgsSchemaMismatch(UnrunnableArgsError):
    """A job's arguments, built against another schema of the task, do not decode here.

    No retry can help, so the job fails at once. Regenerate the producer's client
    (``akadze codegen``) or deploy the worker that matches it.
    """

    task_name: str
    job_fp: str
    worker_fp: str
    #: where decoding failed, as dotted paths ("to.zipCode"); "(arguments)" for the top
    fields: list[str]
    details: str
    template = (
        "task {task_name!r}: arguments built against schema {job_fp} do not decode with "
        "this worker's schema {worker_fp}: {details}"
    )


class InvalidArgsError(AkadzeError, ValueError):
    """Arguments a generated client refused before writing a row (the msgspec guard).

    The message names the task, the problem and where (``$.to.zipCode``), never the value:
    arguments may hold secrets.
    """

    task_name: str
    #: what is wrong, as msgspec says it, without the value ("Expected `int`, got `str`")
    problem: str
    #: where, as a JSON path ("$.user_id"), or None for the arguments as a whole
    path: str | None
    _: KW_ONLY
    #: the problem is in a key of the dict at ``path``, not in a value
    in_key: bool = False

    def describe(self) -> str:
        """The message: the task, the problem and where (``at `$.to` ``), never the value."""
        path = self.path
        where = "" if not path else f" - at `key` in `{path}`" if self.in_key else f" - at `{path}`"
        return f"task {self.task_name!r}: {self.problem}{where}"


class EmbeddedPostgresError(AkadzeError, RuntimeError, init=False):
    """The embedded PostgreSQL could not be found, started, attached to or stopped."""


class JobNotFoundError(AkadzeError, LookupError):
    """Raised by wait_for and result_of for a job id with no row: never enqueued in this
    database, or pruned after it finished. Waiting again cannot help."""

    job_id: int
    template = "job {job_id} does not exist (never enqueued here, or pruned)"


class WaitTimeoutError(AkadzeError, TimeoutError):
    """``wait_for``: the job did not finish within ``timeout_s`` seconds. ``state`` is its state
    when last read (None when it was not read yet): queued, or running."""

    job_id: int
    state: str | None
    timeout_s: float

    def describe(self) -> str:
        """The message: the job, the timeout, and the state it was last seen in (or that it was not read)."""
        seen = f"it is still {self.state}" if self.state else "its state was not read yet"
        return f"job {self.job_id} did not finish within {self.timeout_s:g}s: {seen}"


class DatabaseUnreachableError(AkadzeError, ConnectionError):
    """No connection could be made to the database: nothing listens at its address, the host
    does not resolve, the server refused the login or has no such database.

    Raised by what a producer calls (``enqueue``, ``get_job``, ``wait_for``, ``migrate``) in
    place of the driver's error, which stays the ``__context__``. ``address`` is the URL's
    ``user@host:port/database``, never its password; ``reason`` the driver's own words.
    """

    address: str
    reason: str
    template = "cannot connect to the database at {address} ({reason}); check the database URL"


class SchemaMissingError(AkadzeError):
    """The database has no akadze tables: nothing was migrated there."""

    template = "the akadze schema is missing in this database: run `akadze db migrate`"


class SchemaVersionError(AkadzeError):
    """The database's schema is older than this code needs; a worker does not start on it."""

    database_version: int
    code_version: int
    pending: list[int]

    def describe(self) -> str:
        """The message: both versions, the pending migrations by number, and the command to run."""
        listed = ", ".join(f"{v:04d}" for v in self.pending)
        return (
            f"the database schema is at version {self.database_version} and this akadze needs version "
            f"{self.code_version} (pending: {listed}): run `akadze db migrate`"
        )


class UniqueConflictError(AkadzeError):
    """A requeue would give a job a unique key that another job holds (akadze.Unique); the job
    was left as it was."""

    job_id: int
    #: the job that holds the key now
    held_by: int
    template = (
        "job {job_id} was not requeued: job {held_by} holds its unique key; let that job "
        "finish (or cancel it), then requeue"
    )


class UniqueRaceError(AkadzeError):
    """Every round of a unique enqueue met a job that left its blocking states just then."""

    task_name: str
    rounds: int
    template = (
        "task {task_name!r}: a unique enqueue lost {rounds} races in a row to jobs with the "
        "same key; nothing was inserted; try again"
    )


class ForwardOnlyError(AkadzeError):
    """akadze's migrations cannot be undone: an Alembic downgrade through akadze's revision."""

    template = (
        "akadze's migrations are forward-only: this revision cannot be downgraded. Downgrade "
        "to a revision after it, or restore a backup; akadze runs on a schema newer than it "
        "needs (docs/schema.md)"
    )
