"""``akadze schedules``: the app's schedules, with their last and next fire times."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import typer

from akadze.cli.common import handled, run
from akadze.cli.options import APP_ONLY, Target, expand_options
from akadze.cli.tables import Output, OutputOption, print_json, print_listing

if TYPE_CHECKING:
    from akadze.app import Akadze
    from akadze.schedule import Schedule

app = typer.Typer(help="Periodic schedules.", no_args_is_help=True)


@app.command("list")
@handled
@expand_options
def list_schedules(target: Target = APP_ONLY, output: OutputOption = Output.TABLE) -> None:
    """List the schedules: name, task, expression, zone, last and next fire time."""
    from akadze.schedule import next_fire_after

    application = target.app("schedules list")
    schedules = sorted(application.schedules.values(), key=lambda s: s.name)
    if not schedules:
        run(application.dispose())
        if output is Output.JSON:
            print_json([])
            return
        typer.echo("the app has no schedules")
        return
    now, last = run(_last_runs(application, [s.name for s in schedules]))
    # JSON times in UTC; the table shows them in each schedule's zone
    print_listing(
        output,
        schedules,
        ("NAME", "TASK", "EXPRESSION", "ZONE", "LAST FIRE", "NEXT FIRE"),
        lambda s: (
            s.name,
            s.task.name,
            s.expression,
            s.tz,
            _local(s, last.get(s.name)),
            _local(s, next_fire_after(s, now)),
        ),
        document=lambda s: {
            "name": s.name,
            "task": s.task.name,
            "expression": s.expression,
            "tz": s.tz,
            "last_fire_at": last.get(s.name),
            "next_fire_at": next_fire_after(s, now),
        },
    )


async def _last_runs(application: Akadze, names: list[str]) -> tuple[datetime, dict[str, datetime | None]]:
    from akadze.db.queries import Queries

    try:
        async with application.read_engine.connect() as conn:
            return await Queries.last_schedule_runs(conn, names)
    finally:
        await application.dispose()


def _local(schedule: Schedule, moment: datetime | None) -> str:
    """A fire time in the schedule's own zone, with its offset, so it reads like the expression."""
    if moment is None:
        return "-"
    return moment.astimezone(schedule.zone).isoformat(timespec="seconds")
