"""The options the commands share, declared once: the app and the database a command works on
(``APP``, ``--app``, ``--database-url``, ``--read-database-url``) and how a long-running command
logs (``--log-level``, ``--log-format``).

A command takes each group as one parameter, whose default names the set of options it stands
for (the sets at the end of this module), as ``= typer.Option(...)`` declares one option::

    @app.command("cancel")
    @handled
    @expand_options
    def cancel(job: JobIdArgument, target: Target = BY_OPTION) -> None:
        application = target.database()

:func:`expand_options` puts the set's options in that parameter's place in the command's
signature (typer reads ``__signature__``), so ``--help`` lists them where the command names them,
and calls the command with the group's one value. Only typer is imported for them: the app and
the database stack load when a command asks for them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from akadze.cli.common import app_for, database, fail, log_to
from akadze.events.logs import LogFormat

if TYPE_CHECKING:
    from akadze.app import Akadze

T = TypeVar("T")

AppArgument = Annotated[
    str | None, typer.Argument(metavar="APP", help="module:attr of the app (or --app, or AKADZE_APP)")
]
#: a second positional where a command's positional is its own (an id, a name): refused with a hint
ExtraArgument = Annotated[str | None, typer.Argument(hidden=True, show_default=False)]
AppOption = Annotated[
    str | None, typer.Option("--app", help="The application as module:attr (or AKADZE_APP).")
]
#: the help of ``--database-url`` where it names the database the command works on
URL_HELP = "PostgreSQL URL (or AKADZE_DATABASE_URL)."
ReadUrlOption = Annotated[
    str | None,
    typer.Option(
        "--read-database-url",
        help="A replica to read from (or AKADZE_READ_DATABASE_URL beside AKADZE_DATABASE_URL); "
        "an app names its own read_database_url.",
    ),
]
LogLevelOption = Annotated[str, typer.Option(help="Logging level.")]
LogFormatOption = Annotated[
    LogFormat,
    typer.Option(
        envvar="AKADZE_LOG_FORMAT",
        case_sensitive=False,
        help="text, or json: one JSON object per line (ts, level, logger, message; "
        "a worker's lines add the job's fields).",
    ),
]


class _Group:
    """What a grouped parameter defaults to: the command's parameters it stands for (name ->
    annotation and default, in the order --help lists them), and ``build``, which makes the
    command's one value of their values, passed by name."""

    def __init__(self, build: Callable[..., Any], parameters: dict[str, tuple[Any, Any]]) -> None:
        self.build = build
        self.parameters = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
            for name, (annotation, default) in parameters.items()
        ]


@dataclass(frozen=True)
class Target:
    """The app and the database a command names: ``APP`` or ``--app``, ``--database-url`` and
    ``--read-database-url``, each None where it is not given (or not taken)."""

    app_path: str | None = None
    app_option: str | None = None
    database_url: str | None = None
    read_database_url: str | None = None

    @staticmethod
    def options(*, by_option: bool = False, url: str | None = URL_HELP, read: bool = False) -> Any:
        """The options a command's ``target`` parameter stands for, as its default.

        Args:
            by_option: the command's positional is its own (an id, a name): the app goes by
                ``--app`` alone, and a second positional is refused (exit 2). Otherwise the
                app may be the positional ``APP``.
            url: the help of ``--database-url``; None: the command takes none.
            read: take ``--read-database-url`` too (a command that only reads).
        """
        # typer passes its context to the parameter typed typer.Context (no option): the
        # refusal names the command by it
        parameters: dict[str, tuple[Any, Any]] = (
            {"ctx": (typer.Context, None), "extra": (ExtraArgument, None)}
            if by_option
            else {"app_path": (AppArgument, None)}
        )
        parameters["app_option"] = (AppOption, None)
        if url is not None:
            parameters["database_url"] = (
                Annotated[str | None, typer.Option("--database-url", help=url)],
                None,
            )
        if read:
            parameters["read_database_url"] = (ReadUrlOption, None)
        return _Group(_target, parameters)

    def database(self) -> Akadze:
        """An Akadze on the database the command works on, explicit before environment
        (akadze.cli.common.database); exit 2 when none is configured."""
        return database(self.app_path, self.app_option, self.database_url, self.read_database_url)

    def app(self, command: str) -> Akadze:
        """The app ``akadze {command}`` runs (akadze.cli.common.app_for): APP, --app or
        AKADZE_APP, else exit 2."""
        return app_for(self.app_path, self.app_option, command, self.database_url)


def _target(ctx: typer.Context | None = None, extra: str | None = None, **given: str | None) -> Target:
    """The Target of the values given; a second positional (``extra``) refused, naming the command."""
    if ctx is not None and extra is not None:
        # the command's path below the root, and its own positional: `akadze jobs show ID`
        path = ctx.command_path.removeprefix(ctx.find_root().command_path)
        positional = next(p.metavar for p in ctx.command.params if p.param_type_name == "argument")
        fail(
            2,
            f"error: unexpected argument {extra!r}: `akadze{path} {positional}` takes the app as "
            "--app module:attr (or AKADZE_APP)",
        )
    return Target(**given)


@dataclass(frozen=True)
class Logs:
    """How a long-running command logs: ``--log-level`` and ``--log-format``."""

    level: str
    format: LogFormat

    @staticmethod
    def options() -> Any:
        """The options a command's ``logs`` parameter stands for, as its default."""
        return _Group(
            lambda log_level, log_format: Logs(log_level, log_format),
            {"log_level": (LogLevelOption, "INFO"), "log_format": (LogFormatOption, LogFormat.TEXT)},
        )

    def start(self, *, tracebacks: bool = False) -> None:
        """Send the process's logs to stderr as asked (akadze.cli.common.log_to): a bad level
        is exit 2."""
        log_to(self.level, self.format, tracebacks=tracebacks)


def expand_options(command: Callable[..., T]) -> Callable[..., T]:
    """``command`` with each grouped parameter (one whose default is one of the sets below)
    replaced, in its place, by the options the set stands for; called with their values, it
    calls ``command`` with the group's one value. Goes under ``@handled``, which turns a refused
    positional into its line and exit 2."""
    signature = inspect.signature(command, eval_str=True)
    groups = {name: p.default for name, p in signature.parameters.items() if isinstance(p.default, _Group)}
    # keyword-only: typer passes every value by name, and an option with a default may then
    # stand before a required one
    parameters = [
        option
        for parameter in signature.parameters.values()
        for option in (
            groups[parameter.name].parameters
            if parameter.name in groups
            else [parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY)]
        )
    ]

    @functools.wraps(command)
    def expanded(**given: Any) -> T:
        for name, group in groups.items():
            given[name] = group.build(**{option.name: given.pop(option.name) for option in group.parameters})
        return command(**given)

    expanded.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]  # typer reads it
    expanded.__annotations__ = {p.name: p.annotation for p in parameters} | {
        "return": signature.return_annotation
    }
    return expanded


# -- the sets a command names as a grouped parameter's default ----------------------------------

#: APP or --app, and --database-url: the database a command works on
DATABASE = Target.options()
#: DATABASE and --read-database-url: the database a command only reads
READ = Target.options(read=True)
#: --app and --database-url, for a command whose positional is its own (an id, a name)
BY_OPTION = Target.options(by_option=True)
#: BY_OPTION and --read-database-url, for a command that only reads
READ_BY_OPTION = Target.options(by_option=True, read=True)
#: APP or --app: the app a command runs
APP_ONLY = Target.options(url=None)
#: --log-level and --log-format
LOGS = Logs.options()
