"""The akadze command: parse, call the library, turn the result into an exit code.

Exit codes: 0 success, 1 the operation did not apply, 2 bad usage or configuration.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import logging
import os
import sys
from collections.abc import Callable, Coroutine
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from typer.core import TyperCommand

from akadze.app import Akadze
from akadze.db.errors import is_transient, sqlstate
from akadze.errors import AkadzeError
from akadze.job import Job, JobState

T = TypeVar("T")

app = typer.Typer(
    name="akadze",
    help="A code-first task queue on PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="The schema, and the embedded development server.", no_args_is_help=True)
jobs_app = typer.Typer(help="Look at and act on jobs.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(jobs_app, name="jobs")


class Exit(Exception):
    def __init__(self, code: int, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(message)


def _fail(code: int, message: str) -> NoReturn:
    raise Exit(code, message)


def _handled(fn: Callable[..., T]) -> Callable[..., T]:
    """One place that turns errors into exit codes and one line, no traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except Exit as exc:
            typer.echo(exc.message, err=exc.code != 0)
            raise typer.Exit(exc.code) from None
        except AkadzeError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        except (OSError, ConnectionError) as exc:
            typer.echo(f"error: cannot reach the database ({exc}); check the database URL", err=True)
            raise typer.Exit(2) from None
        except Exception as exc:
            if sqlstate(exc) == "42P01":
                typer.echo("error: the akadze schema is missing: run `akadze db migrate`", err=True)
                raise typer.Exit(2) from None
            if (sqlstate(exc) or "").startswith(("28", "3D")):
                # the server answered but refused the URL: a missing database, role or password
                typer.echo(
                    f"error: cannot connect to the database ({_reason(exc)}); check the database URL",
                    err=True,
                )
                raise typer.Exit(2) from None
            if is_transient(exc):
                typer.echo(
                    f"error: cannot reach the database ({type(exc).__name__}); check the database URL",
                    err=True,
                )
                raise typer.Exit(2) from None
            raise

    return wrapper


def _reason(exc: BaseException) -> str:
    """The driver's own message, on one line (SQLAlchemy's wrapper adds lines and links)."""
    inner: BaseException = exc
    while (nested := inner.__cause__ or getattr(inner, "orig", None)) is not None and nested is not inner:
        inner = nested
    return (str(inner).splitlines() or [type(inner).__name__])[0]


def _run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


# -- finding the app and the database ---------------------------------------------------------

AppOption = Annotated[
    str | None, typer.Option("--app", help="The application as module:attr (or AKADZE_APP).")
]
UrlOption = Annotated[
    str | None,
    typer.Option("--database-url", help="PostgreSQL URL (or AKADZE_DATABASE_URL)."),
]


def load_app(path: str) -> Akadze:
    """Import ``module:attr``; attr is an Akadze, or a function of no arguments returning one."""
    if ":" not in path:
        _fail(2, f"error: app path {path!r} must be module:attr, for example myapp.worker:app")
    module_name, _, attr = path.partition(":")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        _fail(2, f"error: cannot import {module_name!r} for app {path!r}: {exc}")
    except AkadzeError as exc:
        _fail(2, f"error: importing {module_name!r} failed: {exc}")
    except Exception as exc:  # the user's module raised while importing: say where, briefly
        _fail(2, f"error: importing {module_name!r} raised {type(exc).__name__}: {exc}")
    target = getattr(module, attr, None)
    if target is None:
        _fail(2, f"error: module {module_name!r} has no attribute {attr!r}")
    if callable(target) and not isinstance(target, Akadze):
        try:
            target = target()
        except AkadzeError:
            raise
        except Exception as exc:  # a factory that needs arguments, or raised: say so, briefly
            _fail(2, f"error: calling {path!r} to build the app raised {type(exc).__name__}: {exc}")
    if not isinstance(target, Akadze):
        _fail(2, f"error: {path!r} is a {type(target).__qualname__}, not an Akadze application")
    return target


def _app_path(explicit: str | None) -> str | None:
    return explicit or os.environ.get("AKADZE_APP") or None


def _database(app_path: str | None, database_url: str | None) -> Akadze:
    url = database_url or os.environ.get("AKADZE_DATABASE_URL")
    if url:
        return Akadze(database_url=url)
    path = _app_path(app_path)
    if path:
        return load_app(path)
    _fail(
        2,
        "error: no database configured: pass --database-url or set AKADZE_DATABASE_URL "
        "(or name the app with --app / AKADZE_APP)",
    )


# -- worker ---------------------------------------------------------------------------------


@app.command()
@_handled
def worker(
    app_path: Annotated[str | None, typer.Argument(metavar="APP", help="module:attr of the app")] = None,
    app_option: AppOption = None,
    queue: Annotated[
        list[str] | None, typer.Option("-q", "--queue", help="A queue to serve (repeatable).")
    ] = None,
    slots: Annotated[int, typer.Option(min=1, help="Jobs run at once.")] = 10,
    burst: Annotated[bool, typer.Option(help="Exit 0 once no ready job is left.")] = False,
    shutdown_timeout: Annotated[
        float, typer.Option(min=0, help="Seconds running jobs get to finish on a graceful stop.")
    ] = 30.0,
    poll_interval: Annotated[float, typer.Option(min=0.01, help="Seconds between polls.")] = 1.0,
    lost_after: Annotated[
        float,
        typer.Option(min=0.3, help="Seconds without heartbeat before a worker counts as lost."),
    ] = 30.0,
    log_level: Annotated[str, typer.Option(help="Logging level.")] = "INFO",
) -> None:
    """Run a worker (all queues of the app's tasks when no -q)."""
    from akadze.worker import Worker

    path = app_path or _app_path(app_option)
    if not path:
        _fail(2, "error: name the app: akadze worker module:attr (or --app, or AKADZE_APP)")
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    application = load_app(path)

    async def serve() -> int:
        try:
            w = Worker(
                application,
                queues=queue or None,
                slots=slots,
                shutdown_timeout=timedelta(seconds=shutdown_timeout),
                poll_interval=timedelta(seconds=poll_interval),
                lost_after=timedelta(seconds=lost_after),
                heartbeat_interval=timedelta(seconds=min(5.0, lost_after / 4)),
            )
            return await w.run(burst=burst)
        finally:
            # closing a pooled connection that went silent (half-open) waits for a reply
            # that never comes: the worker has stopped, so do not wait for good
            try:
                await asyncio.wait_for(application.dispose(), timeout=10)
            except TimeoutError:
                logging.getLogger("akadze.worker").warning(
                    "closing the database connections took over 10s; exiting without waiting"
                )

    try:
        _run(serve())
    except ValueError as exc:
        _fail(2, f"error: {exc}")


# -- db ----------------------------------------------------------------------------------------


@db_app.command("migrate")
@_handled
def db_migrate(app_option: AppOption = None, database_url: UrlOption = None) -> None:
    """Create or upgrade the schema (idempotent)."""
    application = _database(app_option, database_url)

    async def go() -> list[int]:
        try:
            return await application.migrate()
        finally:
            await application.dispose()

    applied = _run(go())
    typer.echo(f"applied migrations {', '.join(map(str, applied))}" if applied else "schema is up to date")


@db_app.command("sql")
def db_sql() -> None:
    """Print the schema's SQL (for Alembic or hand-run migrations)."""
    from akadze.db.migrate import render_sql

    typer.echo(render_sql(), nl=False)


@db_app.command("start")
@_handled
def db_start(
    pgdata: Annotated[Path | None, typer.Option(help="Data directory (or AKADZE_PGDATA).")] = None,
) -> None:
    """Start (or attach to) the embedded development PostgreSQL and print its URL."""
    from akadze import embedded

    typer.echo(embedded.start(pgdata))


@db_app.command("stop")
@_handled
def db_stop(pgdata: Annotated[Path | None, typer.Option(help="Data directory.")] = None) -> None:
    """Stop the embedded development PostgreSQL."""
    from akadze import embedded

    embedded.stop(pgdata)


@db_app.command("url")
@_handled
def db_url(pgdata: Annotated[Path | None, typer.Option(help="Data directory.")] = None) -> None:
    """Print the embedded server's URL; exit 1 when it is not running."""
    from akadze import embedded

    url = embedded.status(pgdata)
    if url is None:
        _fail(1, "the embedded PostgreSQL is not running (akadze db start)")
    typer.echo(url)


# -- jobs --------------------------------------------------------------------------------------


def _with_conn(application: Akadze, action: Callable[[Any], Coroutine[Any, Any, T]]) -> T:
    async def go() -> T:
        try:
            async with application.engine.begin() as conn:
                return await action(conn)
        finally:
            await application.dispose()

    return _run(go())


def _when(value: Any) -> str:
    return value.isoformat(timespec="seconds") if value is not None else "-"


@jobs_app.command("list")
@_handled
def jobs_list(
    state: Annotated[JobState | None, typer.Option(help="Only jobs in this state.")] = None,
    task: Annotated[str | None, typer.Option(help="Only jobs of this task.")] = None,
    queue: Annotated[str | None, typer.Option(help="Only jobs of this queue.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10000, help="At most this many, newest first.")] = 50,
    app_option: AppOption = None,
    database_url: UrlOption = None,
) -> None:
    """List jobs as a table, newest first."""
    from akadze.db.queries import Queries

    application = _database(app_option, database_url)
    found: list[Job] = _with_conn(
        application,
        lambda conn: Queries.list_jobs(conn, state=state, task=task, queue=queue, limit=limit),
    )
    header = ("ID", "TASK", "QUEUE", "STATE", "ATTEMPT", "RUN AT", "FINISHED AT")
    rows = [
        (
            str(j.id),
            j.task,
            j.queue,
            j.state.value,
            f"{j.attempt}/{j.max_attempts}",
            _when(j.run_at),
            _when(j.finished_at),
        )
        for j in found
    ]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=False)]
    for row in (header, *rows):
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


@jobs_app.command("show")
@_handled
def jobs_show(
    job_id: Annotated[int, typer.Argument(metavar="ID")],
    args: Annotated[bool, typer.Option("--args", help="Also print the job's arguments.")] = False,
    app_option: AppOption = None,
    database_url: UrlOption = None,
) -> None:
    """Show every field of a job (arguments only with --args)."""
    from akadze.codec import encode_json
    from akadze.db.queries import Queries

    application = _database(app_option, database_url)
    job: Job | None = _with_conn(application, lambda conn: Queries.get_job(conn, job_id))
    if job is None:
        _fail(1, f"job {job_id} does not exist")
    fields: list[tuple[str, Any]] = [
        ("id", job.id),
        ("task", job.task),
        ("queue", job.queue),
        ("state", job.state.value),
        ("priority", job.priority),
        ("attempt", job.attempt),
        ("max_attempts", job.max_attempts),
        ("run", job.run),
        ("run_at", _when(job.run_at)),
        ("expires_at", _when(job.expires_at)),
        ("cancel_requested", job.cancel_requested),
        ("worker_id", job.worker_id or "-"),
        ("args_fp", job.args_fp or "-"),
        ("created_at", _when(job.created_at)),
        ("started_at", _when(job.started_at)),
        ("finished_at", _when(job.finished_at)),
        ("result", encode_json(job.result) if job.result is not None else "-"),
        ("args", encode_json(job.args) if args else "(hidden; --args to show)"),
    ]
    for name, value in fields:
        typer.echo(f"{name:<17}{value}")
    typer.echo(f"{'errors':<17}{len(job.errors)}")
    for error in job.errors:
        typer.echo(f"  attempt {error.attempt} at {error.at}: {error.type}: {error.message}")


@jobs_app.command("cancel")
@_handled
def jobs_cancel(
    job_id: Annotated[int, typer.Argument(metavar="ID")],
    app_option: AppOption = None,
    database_url: UrlOption = None,
) -> None:
    """Cancel a queued or running job; exit 1 when it is not active."""
    from akadze.control import request_cancel

    application = _database(app_option, database_url)
    hooks_app = application if application.hooks.on_transition else None
    changed = _with_conn(application, lambda conn: request_cancel(conn, job_id, app=hooks_app))
    if not changed:
        _fail(1, "job is not active")
    typer.echo(f"cancel requested for job {job_id}")


@jobs_app.command("requeue")
@_handled
def jobs_requeue(
    job_id: Annotated[int, typer.Argument(metavar="ID")],
    app_option: AppOption = None,
    database_url: UrlOption = None,
) -> None:
    """Put a failed job back in the queue; exit 1 when it is not failed."""
    from akadze.control import requeue

    application = _database(app_option, database_url)
    hooks_app = application if application.hooks.on_transition else None
    job = _with_conn(application, lambda conn: requeue(conn, job_id, app=hooks_app))
    if job is None:
        _fail(1, f"job {job_id} is not failed (or does not exist): only failed jobs can be requeued")
    typer.echo(f"job {job_id} requeued (attempt {job.attempt} of {job.max_attempts})")


# -- codegen -----------------------------------------------------------------------------------


codegen_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False)


class _CodegenCommand(TyperCommand):
    """``akadze codegen APP --out DIR ...`` parses as it always did; ``diff`` or ``verify`` as
    the first argument (never an app path, which is module:attr) runs that command instead."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        if args and args[0] in ("diff", "verify"):
            group = typer.main.get_group(codegen_app)
            sub = group.commands[args[0]]
            return sub.make_context(f"{info_name} {args[0]}", args[1:], parent=parent, **extra)
        return super().make_context(info_name, args, parent=parent, **extra)


#: one paragraph per line, so that the help's layout does not depend on source line breaks
_CODEGEN_HELP = "\n\n".join(
    [
        "Write typed client packages for producer services; diff manifests; verify stubs.",
        "akadze codegen APP --out DIR [--check] [--from-manifest FILE]: write the clients; with --check "
        "write nothing and exit 1 when they are stale.",
        "akadze codegen diff --against OLD (APP | --manifest NEW) [--allow-breaking]: classify every "
        "change between two manifests for producers already deployed, with the deploy order; exit 1 "
        "on a breaking change.",
        "akadze codegen verify --package DIR [--dsn URL] [--allow-unconsumed]: check every stub's task, "
        "queue and argument fingerprint against the live workers; exit 1 on a mismatch or a queue "
        "that no live worker consumes.",
        "Options of each: akadze codegen diff --help, akadze codegen verify --help.",
    ]
)


@app.command(cls=_CodegenCommand, help=_CODEGEN_HELP)
@_handled
def codegen(
    app_path: Annotated[str | None, typer.Argument(metavar="APP", help="module:attr of the app")] = None,
    out: Annotated[Path, typer.Option("--out", help="The package directory to write.")] = Path("clients"),
    check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 when stale.")] = False,
    from_manifest: Annotated[
        Path | None,
        typer.Option("--from-manifest", help="Render from a manifest, importing no worker code."),
    ] = None,
) -> None:
    """Write typed client packages for producer services (help: _CODEGEN_HELP)."""
    from akadze_codegen.cli import run_codegen

    path = app_path or _app_path(None)
    if path is None and from_manifest is None:
        _fail(2, "error: name the app (module:attr) or pass --from-manifest")
    code = run_codegen(path, out, check, from_manifest)
    if code:
        raise typer.Exit(code)


@codegen_app.command("diff")
@_handled
def codegen_diff(
    app_path: Annotated[
        str | None, typer.Argument(metavar="APP", help="module:attr of the worker app (the new side)")
    ] = None,
    against: Annotated[
        str,
        typer.Option(
            "--against",
            help="The old manifest: a file, a generated package directory, or GIT_REF:path (git show).",
        ),
    ] = "",
    manifest: Annotated[
        str | None,
        typer.Option("--manifest", help="The new manifest (file or package directory) instead of APP."),
    ] = None,
    allow_breaking: Annotated[
        bool, typer.Option("--allow-breaking", help="Exit 0 even when a change is breaking.")
    ] = False,
) -> None:
    """Classify the changes between two manifests for producers already deployed.

    Exit 0: nothing breaking; 1: a breaking change (unless --allow-breaking).

    Exit 2: a manifest cannot be read, or the app cannot be imported.
    """
    from akadze_codegen.diff import run_diff

    if not against:
        _fail(2, "error: pass --against OLD (a manifest file, a package directory or GIT_REF:path)")
    code = run_diff(against, app_path, manifest, allow_breaking=allow_breaking)
    if code:
        raise typer.Exit(code)


@codegen_app.command("verify")
@_handled
def codegen_verify(
    package: Annotated[
        str | None,
        typer.Option("--package", help="A generated package directory (its _manifest.json is read)."),
    ] = None,
    manifest: Annotated[str | None, typer.Option("--manifest", help="A manifest file instead.")] = None,
    dsn: Annotated[
        str | None,
        typer.Option("--dsn", "--database-url", help="The workers' database (or AKADZE_DATABASE_URL)."),
    ] = None,
    allow_unconsumed: Annotated[
        bool,
        typer.Option("--allow-unconsumed", help="Exit 0 even when no live worker consumes a stub's queue."),
    ] = False,
) -> None:
    """Check every stub's task, queue and argument fingerprint against the live workers.

    Exit 0: every stub matches a live worker.

    Exit 1: a fingerprint or queue differs, or a task is not run.

    Exit 1 also when no live worker consumes a stub's queue, unless --allow-unconsumed.

    Exit 2: the manifest cannot be read, or the database cannot be reached.
    """
    from akadze_codegen.verify import run_verify

    if (package is None) == (manifest is None):
        _fail(2, "error: pass --package DIR (a generated package) or --manifest FILE")
    url = dsn or os.environ.get("AKADZE_DATABASE_URL")
    if not url:
        _fail(2, "error: no database configured: pass --dsn URL or set AKADZE_DATABASE_URL")
    source = package if package is not None else manifest
    assert source is not None
    code = run_verify(url, source, allow_unconsumed=allow_unconsumed)
    if code:
        raise typer.Exit(code)


from akadze.cli_schedules import schedules_app  # noqa: E402 (a command group of its own module)

app.add_typer(schedules_app, name="schedules")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
