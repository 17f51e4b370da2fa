"""The akadze command: the root of the command line and the registration of its groups.

Each group lives in its own module (akadze/cli/<group>.py, or the package that owns it) and
is mounted here by one line in the registration block below; what the groups share (exit
codes, finding the app and the database) is akadze/cli/common.py, the options they share
akadze/cli/options.py, how they print akadze/cli/tables.py.

No group is imported with this module. Each is imported when it is run, or when a help page or
a typo's suggestions need its name and help line: a worker process holds only the modules it
runs (no codegen, no dashboard, no listing commands; docs/performance.md, "Worker memory";
tests/cli/test_worker_imports.py), and ``--version`` and the help pages load no SQLAlchemy,
asyncpg or pydantic (the groups import those inside their commands;
tests/cli/test_cli_startup.py).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, MutableMapping, Sequence
from typing import Annotated, Any

import typer
import typer.main
from typer.core import TyperGroup

# -- registration: one line per command group, in the order --help lists them -----------------
#: name -> (module, attribute, how it mounts): a command function (``command``) or a Typer of
#: subcommands (``group``); the module is imported when the name is first looked up
_LAZY: dict[str, tuple[str, str, str]] = {
    "worker": ("akadze.cli.worker", "worker", "command"),
    "web": ("akadze.cli.web", "web", "command"),
    "db": ("akadze.cli.db", "app", "group"),
    "jobs": ("akadze.cli.jobs", "app", "group"),
    "workflows": ("akadze.cli.workflows", "app", "group"),
    "schedules": ("akadze.cli.schedules", "app", "group"),
    "queues": ("akadze.cli.queues", "app", "group"),
    "workers": ("akadze.cli.workers", "app", "group"),
    "codegen": ("akadze_codegen.cli", "app", "group"),
}


def _mount(root: typer.Typer, name: str) -> None:
    """Import the module of command ``name`` (_LAZY) and mount it on ``root`` as the root's
    registration line would."""
    module, attribute, kind = _LAZY[name]
    target = getattr(importlib.import_module(module), attribute)
    if kind == "command":
        root.command(name)(target)
    else:
        root.add_typer(target, name=name)


class _Commands(MutableMapping[str, Any]):
    """The root's commands: the ones built with the root, then each lazy group, built (and its
    module imported) on first lookup. Every name is listed without importing anything."""

    def __init__(self, built: MutableMapping[str, Any]) -> None:
        self._built = dict(built)

    def __getitem__(self, name: str) -> Any:
        if name not in self._built and name in _LAZY:
            holder = typer.Typer(rich_markup_mode=None)
            _mount(holder, name)
            self._built[name] = typer.main.get_group(holder).commands[name]
        return self._built[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._built
        yield from (name for name in _LAZY if name not in self._built)

    def __len__(self) -> int:
        return len(self._built.keys() | _LAZY.keys())


def _unset_help_is_false(command: Any, ctx: Any) -> None:
    """Give ``command``'s help flag, and its subcommands', the default ``False``.

    typer (0.2x) coerces every parameter's value through a pydantic TypeAdapter, built on first
    use, unless the value is already a bool; an unset help flag is ``None``, so every help page
    and every command imported pydantic for it. ``False`` means the same to the flag.
    """
    option = command.get_help_option(ctx)
    if option is not None and option.default is None:
        option.default = False
    for sub in getattr(command, "commands", {}).values():
        _unset_help_is_false(sub, ctx)


def _summarize(command: Any) -> None:
    """Give ``command`` and its subcommands a short help for the listings of ``--help``: the
    help's first clause, whole (click would cut the first sentence at the column it has left
    and end it with "...")."""
    if not getattr(command, "short_help", None) and getattr(command, "help", None):
        command.short_help = first_clause(" ".join(command.help.split()))
    for sub in getattr(command, "commands", {}).values():
        _summarize(sub)


def first_clause(text: str) -> str:
    """``text`` up to its first ". ", ": " or "; " outside parentheses past the 20th
    character (a shorter one says too little), else all of it."""
    depth = 0
    for at, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        elif depth == 0 and at >= 20 and text.startswith((". ", ": ", "; "), at):
            return text[:at]
    return text


class _Root(TyperGroup):
    """typer's group, whose commands are a :class:`_Commands`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _Commands(self.commands)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = self.commands.get(cmd_name)
        if command is not None:
            _unset_help_is_false(command, ctx)
            _summarize(command)
        return command

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None and option.default is None:
            option.default = False
        return option

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """click's entry point; a usage error (an unknown command, a bad option value) is one
        line on stderr and exit 2, as every error of the CLI is, instead of click's usage block."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except _CLICK_ERROR as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":
                exc.show()  # `akadze jobs` alone: the group's help, as asked for
            else:
                from akadze.cli.common import say_usage_error

                say_usage_error(usage_error(exc), exc, args)
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        # typer.Exit(code) comes back as its code; a command that returned, as None
        sys.exit(code if isinstance(code, int) else 0)


#: click's base of usage errors, wherever this typer keeps click (its own copy since 0.2x)
_CLICK_ERROR: type[Any] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def usage_error(exc: Any) -> str:
    """click's error as one line naming the command's help (typer's pydantic coercion prefixes
    the reason with "Value error, ")."""
    message = " ".join(exc.format_message().replace("Value error, ", "").split())
    context = getattr(exc, "ctx", None)
    where = f" (see `{context.command_path} --help`)" if context is not None else ""
    return f"error: {message}{where}"


app = typer.Typer(
    name="akadze",
    cls=_Root,
    help="A code-first task queue on PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # plain help: rich's boxes cut lines at 80 columns and read [brackets] as markup
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        from akadze import __version__

        typer.echo(f"akadze {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """A code-first task queue on PostgreSQL."""


def main() -> None:
    """The ``akadze`` console script (pyproject's entry point): runs the typer app, which exits
    with the command's code (0, 1 did not apply, 2 usage or configuration)."""
    app()
