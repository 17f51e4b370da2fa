"""``akadze jobs``: look at jobs, cancel and requeue them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from akadze.cli.common import JobIdArgument, fail, handled, job_id, with_conn
from akadze.cli.options import BY_OPTION, READ, READ_BY_OPTION, Target, expand_options
from akadze.cli.tables import Output, OutputOption, print_json, print_listing, when
from akadze.job import Job, JobState

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from akadze.app import Akadze
    from akadze.control.explain import Explanation

app = typer.Typer(help="Look at and act on jobs.", no_args_is_help=True)


@app.command("list")
@handled
@expand_options
def list_jobs(
    state: Annotated[JobState | None, typer.Option(help="Only jobs in this state.")] = None,
    task: Annotated[str | None, typer.Option(help="Only jobs of this task.")] = None,
    queue: Annotated[str | None, typer.Option(help="Only jobs of this queue.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=10000, help="At most this many, newest first.")] = 50,
    target: Target = READ,
    output: OutputOption = Output.TABLE,
) -> None:
    """List jobs as a table, newest first (--output json: an array of jobs, without arguments)."""
    from akadze.db.queries import Queries

    application = target.database()
    found: list[Job] = with_conn(
        application,
        lambda conn: Queries.list_jobs(conn, state=state, task=task, queue=queue, limit=limit),
        read=True,
    )
    print_listing(
        output,
        found,
        ("ID", "TASK", "QUEUE", "STATE", "ATTEMPT", "RUN AT", "FINISHED AT"),
        lambda j: (
            str(j.id),
            j.task,
            j.queue,
            j.state.value,
            f"{j.attempt}/{j.max_attempts}",
            when(j.run_at),
            when(j.finished_at),
        ),
        document=lambda j: job_document(j, args=False),
    )


@app.command("show")
@handled
@expand_options
def show(
    job: JobIdArgument,
    args: Annotated[bool, typer.Option("--args", help="Also print the job's arguments.")] = False,
    target: Target = READ_BY_OPTION,
    output: OutputOption = Output.TABLE,
) -> None:
    """Show every field of a job (arguments only with --args; --output json: one object)."""
    from akadze.codec import encode_json
    from akadze.db.queries import Queries

    wanted = job_id(job)
    application = target.database()
    found: Job | None = with_conn(application, lambda conn: Queries.get_job(conn, wanted), read=True)
    if found is None:
        fail(1, f"job {wanted} does not exist")
    if output is Output.JSON:
        print_json(job_document(found, args=args))
        return
    fields: list[tuple[str, Any]] = [
        ("id", found.id),
        ("task", found.task),
        ("queue", found.queue),
        ("state", found.state.value),
        ("priority", found.priority),
        ("attempt", found.attempt),
        ("max_attempts", found.max_attempts),
        ("run", found.run),
        ("run_at", when(found.run_at)),
        ("expires_at", when(found.expires_at)),
        ("cancel_requested", found.cancel_requested),
        ("worker_id", found.worker_id or "-"),
        ("workflow", f"{found.workflow_id} (step {found.step})" if found.workflow_id is not None else "-"),
        ("args_fp", found.args_fp or "-"),
        ("created_at", when(found.created_at)),
        ("started_at", when(found.started_at)),
        ("finished_at", when(found.finished_at)),
        ("result", encode_json(found.result) if found.result is not None else "-"),
        ("args", encode_json(found.args) if args else "(hidden; --args to show)"),
    ]
    for name, value in fields:
        typer.echo(f"{name:<17}{value}")
    typer.echo(f"{'errors':<17}{len(found.errors)}")
    for error in found.errors:
        typer.echo(f"  attempt {error.attempt} at {error.at}: {error.type}: {error.message}")


def job_document(job: Job, *, args: bool) -> dict[str, Any]:
    """A job as ``--output json`` prints it: Job's field names, every time in one format (UTC,
    ``Z``); ``args`` is null unless asked for."""
    import msgspec

    document: dict[str, Any] = msgspec.to_builtins(job)
    if not args:
        document["args"] = None
    for error in document["errors"]:
        # stored as the database wrote it (+00:00); one time format in the document: msgspec's
        error["at"] = _utc_text(error["at"])
    return document


def _utc_text(stored: str) -> str:
    """An ISO 8601 time as msgspec writes the job's own times (``...Z``); unchanged when it
    does not parse."""
    from datetime import UTC, datetime

    import msgspec

    try:
        moment = datetime.fromisoformat(stored)
    except ValueError:
        return stored
    text: str = msgspec.to_builtins(moment.astimezone(UTC) if moment.tzinfo else moment)
    return text


@app.command("explain")
@handled
@expand_options
def explain(job: JobIdArgument, target: Target = READ_BY_OPTION, output: OutputOption = Output.TABLE) -> None:
    """Say why a job is where it is, from the database alone: waiting for which steps of its
    workflow, delayed until when, its queue paused, no live worker serving it, held by its limit
    and by which jobs (with --app, which knows the limits), unknown to the live workers, running
    where since when, finished with which last error. Exit 1 when the job does not exist."""
    wanted = job_id(job)
    application = target.database()
    found = with_conn(application, lambda conn: _explain(conn, wanted, application), read=True)
    if found is None:
        fail(1, f"job {wanted} does not exist")
    if output is Output.JSON:
        print_json(found)
        return
    typer.echo(f"job {found.id} ({found.task} in queue {found.queue}) {found.state.phrase}:")
    for reason in found.reasons:
        typer.echo(f"  - {reason.message}")


async def _explain(conn: AsyncConnection, wanted: int, application: Akadze) -> Explanation | None:
    """The thin IO of ``jobs explain``: read the rows, let akadze.control.explain decide. A task's
    Limit is in the app's code: with the app (--app), its permits say whether it holds the job."""
    from akadze.control.explain import WAITED_NAMED, explain as decide, hold_of
    from akadze.db.queries import Queries

    found = await Queries.get_job(conn, wanted)
    if found is None:
        return None
    now, paused_at, parked = await Queries.explain_context(conn, found.id, found.queue)
    live = await Queries.live_task_schemas(conn)
    workers = await Queries.live_workers(conn) if found.state is JobState.RUNNING else []
    task = application.tasks.get(found.task)
    limit = getattr(task.options, "limit", None) if task is not None else None
    hold = None
    if limit is not None and found.state is JobState.QUEUED:
        per_s = None if limit.per is None else limit.per.total_seconds()
        holders = await Queries.limit_holders(conn, found.id, key=limit.key, per_s=per_s)
        hold = hold_of(limit, holders, now=now)
    if parked == "limit" and limit is not None and hold is None:
        # parked (by its enqueue, or by a claim while its group was full) and its limit has room
        # now: the next limited claim takes it as it takes a ready job (docs/flow-control.md)
        parked = None
    # a workflow's step parked for its parents: which ones (from the database alone, app or not)
    waits = None
    if found.state is JobState.QUEUED and parked == "deps":
        waits = await Queries.waited_steps(conn, found.id, limit=WAITED_NAMED)
    return decide(
        found,
        now=now,
        paused_at=paused_at,
        live=live,
        workers=workers,
        hold=hold,
        parked=parked,
        limits_known=task is not None,
        waits=waits,
    )


def _hooks(application: Akadze) -> Akadze | None:
    """The app when it has on_transition hooks to run (an app built from a bare URL has none)."""
    return application if application.hooks.on_transition else None


@app.command("cancel")
@handled
@expand_options
def cancel(job: JobIdArgument, target: Target = BY_OPTION) -> None:
    """Cancel a queued job at once, or ask a running one to stop; exit 1 when it is not active."""
    from akadze.control import request_cancel
    from akadze.db.queries import Queries

    wanted = job_id(job)
    application = target.database()

    async def act(conn: AsyncConnection) -> tuple[bool, Job | None]:
        changed = await request_cancel(conn, wanted, app=_hooks(application))
        return changed, await Queries.get_job(conn, wanted)

    changed, after = with_conn(application, act)
    if after is None:
        fail(1, f"job {wanted} does not exist")
    if not changed:
        # the spec's words first (a script may match them), then which job and why
        fail(1, f"job is not active: job {wanted} {after.state.phrase}")
    if after.state is JobState.CANCELLED:
        typer.echo(f"job {wanted} cancelled")
    else:
        typer.echo(
            f"cancel requested for job {wanted}: it is running, and ends cancelled unless it finishes first"
        )


@app.command("requeue")
@handled
@expand_options
def requeue(job: JobIdArgument, target: Target = BY_OPTION) -> None:
    """Put a failed or cancelled job back in the queue; exit 1 when it is neither, or when a
    newer job holds its unique key (akadze.Unique)."""
    from akadze.control import requeue as requeue_job
    from akadze.db.queries import Queries
    from akadze.errors import UniqueConflictError

    wanted = job_id(job)
    application = target.database()

    async def act(conn: AsyncConnection) -> tuple[Job | None, JobState | None]:
        try:
            requeued = await requeue_job(conn, wanted, app=_hooks(application))
        except UniqueConflictError as exc:
            fail(1, str(exc))  # did not apply: a newer job holds its unique key
        if requeued is not None:
            return requeued, None
        found = await Queries.get_job(conn, wanted)
        return None, found.state if found is not None else None

    requeued, state = with_conn(application, act)
    if requeued is None:
        if state is None:
            fail(1, f"job {wanted} does not exist")
        if state is JobState.CANCELLED:
            fail(
                1, f"job {wanted} was not requeued: it is a workflow step cancelled before its parents ended"
            )
        fail(1, f"job {wanted} {state.phrase}: only failed or cancelled jobs can be requeued")
    typer.echo(f"job {wanted} requeued (attempt {requeued.attempt} of {requeued.max_attempts})")
