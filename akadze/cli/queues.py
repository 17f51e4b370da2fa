"""``akadze queues``: list queues; pause and resume one (persisted; every worker sees it at once)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from akadze.cli.common import handled, warn, with_conn
from akadze.cli.options import BY_OPTION, READ, Target, expand_options
from akadze.cli.tables import Output, OutputOption, print_listing

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

app = typer.Typer(help="List, pause and resume queues.", no_args_is_help=True)

QueueArgument = Annotated[str, typer.Argument(metavar="NAME", help="The queue's name.", show_default=False)]


@app.command("list")
@handled
@expand_options
def list_queues(target: Target = READ, output: OutputOption = Output.TABLE) -> None:
    """Per queue: paused, ready, delayed, held (by a Limit or a workflow's parents), running and
    failed jobs, the oldest ready job's wait and the live workers serving it. Lists the app's
    queues (with --app), and every queue that has a queued, running or failed job, is paused or
    is served by a live worker."""
    from akadze.db.queries import Queries
    from akadze.db.stats import QueueStats

    application = target.database()
    names = application.queues()

    found: list[QueueStats] = with_conn(
        application, lambda conn: Queries.queue_stats(conn, names, full=True), read=True
    )
    print_listing(
        output,
        found,
        ("NAME", "PAUSED", "READY", "DELAYED", "HELD", "RUNNING", "FAILED", "OLDEST READY", "WORKERS"),
        lambda q: (
            q.name,
            "yes" if q.paused else "no",
            str(q.ready),
            str(q.delayed),
            str(q.held),
            str(q.running),
            str(q.failed),
            f"{q.oldest_ready_s:.1f}s" if q.oldest_ready_s is not None else "-",
            str(q.workers),
        ),
        empty="no queues: no job, no live worker and no pause yet",
    )


@app.command("pause")
@handled
@expand_options
def pause(name: QueueArgument, target: Target = BY_OPTION) -> None:
    """Stop every worker taking jobs from queue NAME (running jobs finish; enqueue still works).
    Exit 0, saying whether it changed anything; the queue need not have any job yet."""
    _switch(name, target, pause=True)


@app.command("resume")
@handled
@expand_options
def resume(name: QueueArgument, target: Target = BY_OPTION) -> None:
    """Let workers take jobs from queue NAME again, waking them at once. Exit 0, saying whether
    it changed anything."""
    _switch(name, target, pause=False)


def _switch(name: str, target: Target, *, pause: bool) -> None:
    from akadze.db.queries import Queries
    from akadze.job import check_name

    check_name("queue", name)
    application = target.database()
    known = application.queues()
    if application.tasks and name not in known:
        # an app that knows its queues (--app, AKADZE_APP) catches a typo, as `worker -q` does;
        # the queue is switched anyway: a job can be put in any queue (using(queue=...))
        warn(
            f"no task of the app uses queue {name!r} (the app's tasks use: {', '.join(known)}); "
            f"{'pausing' if pause else 'resuming'} it anyway"
        )

    async def act(conn: AsyncConnection) -> bool:
        return await (Queries.pause_queue(conn, name) if pause else Queries.resume_queue(conn, name))

    changed = with_conn(application, act)
    if pause:
        typer.echo(
            f"queue {name!r} paused" if changed else f"queue {name!r} was already paused; nothing changed"
        )
    else:
        typer.echo(
            f"queue {name!r} resumed" if changed else f"queue {name!r} was not paused; nothing changed"
        )
