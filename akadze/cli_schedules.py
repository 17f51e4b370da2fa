"""``akadze schedules``: the app's schedules, with their last and next fire times.

Mounted on the ``akadze`` command by akadze/cli.py; the helpers of that module (finding the
app, turning errors into exit codes) are imported when a command runs, not at import.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated

import typer

from akadze.app import Akadze
from akadze.db.queries import Queries
from akadze.schedule import Schedule, next_fire_after

schedules_app = typer.Typer(help="Periodic schedules.", no_args_is_help=True)


@schedules_app.command("list")
def list_schedules(
    app_path: Annotated[str | None, typer.Argument(metavar="APP", help="module:attr of the app")] = None,
    app_option: Annotated[
        str | None, typer.Option("--app", help="The application as module:attr (or AKADZE_APP).")
    ] = None,
) -> None:
    """List the schedules: name, task, expression, zone, last and next fire time."""
    from akadze import cli

    cli._handled(_list)(app_path or cli._app_path(app_option))


def _list(path: str | None) -> None:
    from akadze import cli

    if not path:
        cli._fail(2, "error: name the app: akadze schedules list module:attr (or --app, or AKADZE_APP)")
    application = cli.load_app(path)
    schedules = sorted(application.schedules.values(), key=lambda s: s.name)
    if not schedules:
        asyncio.run(application.dispose())
        typer.echo("the app has no schedules")
        return
    now, last = asyncio.run(_last_runs(application, [s.name for s in schedules]))
    header = ("NAME", "TASK", "EXPRESSION", "ZONE", "LAST FIRE", "NEXT FIRE")
    rows = [
        (
            s.name,
            s.task.name,
            s.expression,
            s.tz,
            _local(s, last.get(s.name)),
            _local(s, next_fire_after(s, now)),
        )
        for s in schedules
    ]
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    for row in (header, *rows):
        typer.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())


async def _last_runs(application: Akadze, names: list[str]) -> tuple[datetime, dict[str, datetime | None]]:
    try:
        async with application.engine.connect() as conn:
            return await Queries.last_schedule_runs(conn, names)
    finally:
        await application.dispose()


def _local(schedule: Schedule, moment: datetime | None) -> str:
    """A fire time in the schedule's own zone, with its offset, so it reads like the expression."""
    if moment is None:
        return "-"
    return moment.astimezone(schedule.zone).isoformat(timespec="seconds")
