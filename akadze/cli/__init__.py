"""The akadze command: the root of the command line and the registration of its groups.

Each group lives in its own module (akadze/cli/<group>.py, or the package that owns it) and
is mounted here by one line in the registration block below; what the groups share (exit
codes, finding the app and the database, tables) is akadze/cli/common.py.
"""

from __future__ import annotations

from typing import Annotated

import typer

from akadze.cli import db, jobs, queues, schedules, web, worker, workers
from akadze_codegen.cli import app as codegen

app = typer.Typer(
    name="akadze",
    help="A code-first task queue on PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
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


# -- registration: one line per command group -----------------------------------------------
app.command("worker")(worker.worker)
app.add_typer(db.app, name="db")
app.add_typer(jobs.app, name="jobs")
app.add_typer(schedules.app, name="schedules")
app.add_typer(queues.app, name="queues")
app.add_typer(workers.app, name="workers")
app.command("web")(web.web)
app.add_typer(codegen, name="codegen")


def main() -> None:
    app()
