"""``akadze queues``: list queues; pause and resume one (persisted; every worker sees it at once)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from akadze.cli.common import (
    AppArgument,
    AppOption,
    ExtraArgument,
    Output,
    OutputOption,
    ReadUrlOption,
    UrlOption,
    database,
    handled,
    print_listing,
    refuse_extra,
    warn,
    with_conn,
)

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

app = typer.Typer(help="List, pause and resume queues.", no_args_is_help=True)

QueueArgument = Annotated[str, typer.Argument(metavar="NAME", help="The queue's name.", show_default=False)]


@app.command("list")
@handled
def list_queues(
    app_path: AppArgument = None,
    app_option: AppOption = None,
    database_url: UrlOption = None,
    read_database_url: ReadUrlOption = None,
    output: OutputOption = Output.TABLE,
) -> None:
    """Per queue: paused, ready, delayed, held (by a Limit or a workflow's parents), running and
    failed jobs, the oldest ready job's wait and the live workers serving it. Lists the app's
    queues (with --app), and every queue that has a queued, running or failed job, is paused or
    is served by a live worker."""
    from akadze.db.queries import Queries
    from akadze.db.stats import QueueStats

    application = database(app_path, app_option, database_url, read_database_url)
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
def pause(
    name: QueueArgument,
    extra: ExtraArgument = None,
    app_option: AppOption = None,
    database_url: UrlOption = None,
) -> None:
    """Stop every worker taking jobs from queue NAME (running jobs finish; enqueue still works).
    Exit 0, saying whether it changed anything; the queue need not have any job yet."""
    _switch(name, extra, app_option, database_url, pause=True)


@app.command("resume")
@handled
def resume(
    name: QueueArgument,
    extra: ExtraArgument = None,
    app_option: AppOption = None,
    database_url: UrlOption = None,
) -> None:
    """Let workers take jobs from queue NAME again, waking them at once. Exit 0, saying whether
    it changed anything."""
    _switch(name, extra, app_option, database_url, pause=False)


def _switch(
    name: str, extra: str | None, app_option: str | None, database_url: str | None, *, pause: bool
) -> None:
    from akadze.db.queries import Queries
    from akadze.job import check_name

    refuse_extra(extra, f"queues {'pause' if pause else 'resume'} NAME")
    check_name("queue", name)
    application = database(None, app_option, database_url)
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
