"""What every command group shares: errors turned into exit codes (in one place), the app and
the database a command works on, and job ids. The options they share are akadze/cli/options.py;
how they print, akadze/cli/tables.py.

Exit codes: 0 success, 1 the operation did not apply, 2 bad usage or configuration.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import typer

from akadze.errors import AkadzeError
from akadze.events.logs import LogFormat

if TYPE_CHECKING:
    # imported where used: help pages and --version load no SQLAlchemy, asyncpg or pydantic
    # (tests/cli/test_cli_startup.py)
    from akadze.app import Akadze

T = TypeVar("T")

#: the largest job id: ids are PostgreSQL bigints
MAX_JOB_ID = 2**63 - 1


class Exit(Exception):
    """A command's end: the exit code and the one line to print (stderr unless the code is 0)."""

    def __init__(self, code: int, message: str) -> None:
        self.code = code
        self.message = message
        super().__init__(message)


def fail(code: int, message: str) -> NoReturn:
    """End the command with ``code`` and ``message`` (on stderr unless the code is 0): raises Exit,
    which ``handled`` prints as one line and turns into the exit code."""
    raise Exit(code, message)


def handled(fn: Callable[..., T]) -> Callable[..., T]:
    """The one place that turns errors into exit codes and one line, no traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        _named_database.clear()
        _json_lines.clear()
        try:
            return fn(*args, **kwargs)
        except Exit as exc:
            _say(exc.message, exc.code)
            raise typer.Exit(exc.code) from None
        except AkadzeError as exc:
            _say(f"error: {exc}", 2)
            raise typer.Exit(2) from None
        except (OSError, ConnectionError) as exc:
            _say(f"error: cannot reach the database ({exc}); check the database URL", 2)
            raise typer.Exit(2) from None
        except Exception as exc:
            line = _database_failure(exc)
            if line is None:
                raise
            _say(line, 2)
            raise typer.Exit(2) from None

    return wrapper


#: how this command named its database (the app as given on the command line, or
#: ``--database-url``), for the `akadze db migrate` an error tells the user to run; the URL
#: itself is never repeated (it may hold a password). Cleared by every command (handled).
_named_database: list[str] = []


#: non-empty while the command logs as JSON (``--log-format json``): its own warnings and errors
#: are then JSON lines too, on the same stream (stderr). Cleared by every command (handled).
_json_lines: list[bool] = []


def _say(line: str, code: int) -> None:
    """A command's last line: stdout for success, else stderr, where `akadze db migrate` names
    the database as the command was given it (a JSON line while the command logs as JSON)."""
    if code != 0 and _named_database:
        line = line.replace("`akadze db migrate`", f"`akadze db migrate {' '.join(_named_database)}`")
    if code != 0 and _json_lines:
        _json_line(logging.ERROR, line.removeprefix("error: "))
        return
    typer.echo(line, err=code != 0)


def say_usage_error(line: str, exc: Any, args: Sequence[str] | None) -> None:
    """A usage error's line (the root's click error, ``exc``): a JSON line when the command that
    failed logs as JSON (its ``--log-format json`` among ``args``, or AKADZE_LOG_FORMAT), as
    every other line of its stderr is; else the line."""
    command = getattr(getattr(exc, "ctx", None), "command", None)
    logs = any(param.name == "log_format" for param in getattr(command, "params", ()))
    given = list(sys.argv[1:] if args is None else args)
    asked = os.environ.get("AKADZE_LOG_FORMAT", "")
    for at, arg in enumerate(given):
        if arg.startswith("--log-format="):
            asked = arg.partition("=")[2]
        elif arg == "--log-format" and at + 1 < len(given):
            asked = given[at + 1]
    if logs and asked.lower() == LogFormat.JSON:
        _json_line(logging.ERROR, line.removeprefix("error: "))
    else:
        typer.echo(line, err=True)


def warn(message: str) -> None:
    """A warning of the command on stderr: ``warning: message``, or a JSON line while the
    command logs as JSON."""
    if _json_lines:
        _json_line(logging.WARNING, message)
    else:
        typer.echo(f"warning: {message}", err=True)


def _json_line(level: int, message: str) -> None:
    from akadze.events.logs import JsonFormatter

    record = logging.LogRecord("akadze.cli", level, __file__, 0, message, None, None)
    typer.echo(JsonFormatter().format(record), err=True)


def log_to(level: str, log_format: LogFormat, *, tracebacks: bool = False) -> None:
    """Send the process's logs to stderr (akadze.events.logs.configure); in JSON, the command's
    own warnings and errors from here on are JSON lines too. A bad level is exit 2."""
    from akadze.events.logs import configure

    if LogFormat(log_format) is LogFormat.JSON:
        _json_lines.append(True)
    try:
        configure(level, log_format, tracebacks=tracebacks)
    except ValueError:
        fail(2, f"error: --log-level {level!r} is not a logging level (DEBUG, INFO, WARNING, ERROR)")


def _database_failure(exc: Exception) -> str | None:
    """One line for a database that cannot serve the command, or None for anything else."""
    from akadze.db.errors import is_transient, no_server_fits, sqlstate

    code = sqlstate(exc) or ""
    if code == "42P01":
        return "error: the akadze schema is missing: run `akadze db migrate`"
    if code.startswith(("28", "3D")) or no_server_fits(exc):
        # the server answered but refused the URL: a missing database, role or password; or
        # every host answered and none is what target_session_attrs asks for
        return f"error: cannot connect to the database ({_reason(exc)}); check the database URL"
    if is_transient(exc):
        return f"error: cannot reach the database ({type(exc).__name__}); check the database URL"
    return None


def _reason(exc: BaseException) -> str:
    """The driver's own message, on one line (SQLAlchemy's wrapper adds lines and links)."""
    inner: BaseException = exc
    while (nested := inner.__cause__ or getattr(inner, "orig", None)) is not None and nested is not inner:
        inner = nested
    return (str(inner).splitlines() or [type(inner).__name__])[0]


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine to its end (asyncio is imported here: help pages never need it)."""
    import asyncio

    return asyncio.run(coro)


# -- the app and the database ------------------------------------------------------------------

READ_URL_ENV = "AKADZE_READ_DATABASE_URL"


def app_for(
    positional: str | None, option: str | None, command: str, database_url: str | None = None
) -> Akadze:
    """The app a command needs (worker, web, schedules): APP, --app or AKADZE_APP, else exit 2.

    ``database_url`` (``--database-url``) is the URL of an app built with ``Akadze()`` alone:
    it is ``AKADZE_DATABASE_URL`` while the app is imported; an app built with a URL or an
    engine of its own is refused with it, rather than silently using another database.
    """
    from akadze.app_path import choose_app_path, load_app

    path = choose_app_path(positional, option)
    if not path:
        fail(2, f"error: name the app: akadze {command} module:attr (or --app, or AKADZE_APP)")
    if positional or option:
        _named_database[:] = _as_given(positional, path)
    if not database_url:
        return load_app(path)
    from akadze.app import DATABASE_URL_ENV
    from akadze.db.engines import normalize_url

    before = os.environ.get(DATABASE_URL_ENV)
    os.environ[DATABASE_URL_ENV] = database_url
    try:
        application = load_app(path)
    finally:
        if before is None:
            del os.environ[DATABASE_URL_ENV]
        else:
            os.environ[DATABASE_URL_ENV] = before
    if application.engine.url.render_as_string(hide_password=False) != normalize_url(database_url):
        fail(
            2,
            f"error: the app {path!r} is built with a database of its own, so --database-url would "
            "not apply; --database-url is for an app built with Akadze() alone, which reads "
            "AKADZE_DATABASE_URL",
        )
    _named_database[:] = [*_as_given(positional, path), "--database-url", "<the same URL>"]
    return application


def _as_given(positional: str | None, path: str) -> list[str]:
    """The app as the command line named it: ``APP``, or ``--app APP``."""
    return [path] if positional else ["--app", path]


def database(
    positional: str | None,
    option: str | None,
    database_url: str | None,
    read_database_url: str | None = None,
) -> Akadze:
    """An Akadze on the database a command works on.

    Explicit before environment: ``--database-url``, then the app named on the command line,
    then ``AKADZE_DATABASE_URL``, then ``AKADZE_APP``. A replica to read from comes with a
    URL: ``--read-database-url``, or ``AKADZE_READ_DATABASE_URL`` with ``AKADZE_DATABASE_URL``;
    an app reads from the replica it was built with.
    """
    from akadze.app import Akadze
    from akadze.app_path import choose_app_path

    if database_url:
        _named_database[:] = ["--database-url", "<the same URL>"]
        return Akadze(database_url=database_url, read_database_url=read_database_url or None)
    named = choose_app_path(positional, option) if (positional or option) else None
    if named:
        _named_database[:] = _as_given(positional, named)
        return _app_alone(named, read_database_url)
    url = os.environ.get("AKADZE_DATABASE_URL")
    if url:
        return Akadze(
            database_url=url, read_database_url=read_database_url or os.environ.get(READ_URL_ENV) or None
        )
    path = choose_app_path(None, None)
    if path:
        return _app_alone(path, read_database_url)
    fail(
        2,
        "error: no database configured: pass --database-url or set AKADZE_DATABASE_URL "
        "(or name the app with --app / AKADZE_APP)",
    )


def _app_alone(path: str, read_database_url: str | None) -> Akadze:
    if read_database_url:
        fail(
            2,
            "error: --read-database-url goes with --database-url or AKADZE_DATABASE_URL; an app "
            "reads from the replica it was built with (Akadze(..., read_database_url=...))",
        )
    from akadze.app_path import load_app

    return load_app(path)


def with_conn(
    application: Akadze, action: Callable[[Any], Coroutine[Any, Any, T]], *, read: bool = False
) -> T:
    """Run ``action(conn)`` in one transaction, then close the app's connections. ``read``:
    the action only reads, on the app's read engine (its replica, if it has one)."""

    async def go() -> T:
        try:
            if read:
                async with application.read_engine.connect() as conn:
                    return await action(conn)
            async with application.engine.begin() as conn:
                return await action(conn)
        finally:
            await application.dispose()

    return run(go())


# -- values ------------------------------------------------------------------------------------

JobIdArgument = Annotated[str, typer.Argument(metavar="ID", help="The job's id.", show_default=False)]


def job_id(text: str, what: str = "job") -> int:
    """A job id (or ``what``'s: a workflow's) from the command line: a whole number that
    PostgreSQL's bigint holds, else exit 2."""
    try:
        value = int(text.strip())
    except ValueError:
        fail(2, f"error: {what} id {text!r} is not a number: give the {what}'s id, for example 42")
    if not 1 <= value <= MAX_JOB_ID:
        fail(2, f"error: {what} id {text} is out of range: {what} ids run from 1 to {MAX_JOB_ID}")
    return value
