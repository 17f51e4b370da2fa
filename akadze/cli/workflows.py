"""``akadze workflows``: look at a workflow's steps, cancel a whole workflow."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from akadze.cli.common import fail, handled, job_id, with_conn
from akadze.cli.options import BY_OPTION, READ_BY_OPTION, Target, expand_options
from akadze.cli.tables import Output, OutputOption, print_json, print_table, when

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncConnection

    from akadze.db.graph import StepView, WorkflowView

app = typer.Typer(
    help="Look at and act on workflows (steps that wait for other steps).", no_args_is_help=True
)

WorkflowIdArgument = Annotated[
    str, typer.Argument(metavar="ID", help="The workflow's id.", show_default=False)
]
#: the table names at most this many of a step's parents (--output json names them all)
AFTER_NAMED = 5


@app.command("show")
@handled
@expand_options
def show(
    workflow: WorkflowIdArgument, target: Target = READ_BY_OPTION, output: OutputOption = Output.TABLE
) -> None:
    """Show a workflow's steps as a table, level by level: each step's job, task, state (waiting:
    queued until its parents finish), attempts and the steps it waits for (--output json: one
    object, every step with its level). Exit 1 when there is no such workflow."""
    from akadze.db.graph import levels
    from akadze.db.queries import Queries

    wanted = job_id(workflow, "workflow")
    application = target.database()
    found: WorkflowView | None = with_conn(
        application, lambda conn: Queries.workflow_steps(conn, wanted), read=True
    )
    if found is None:
        fail(1, f"workflow {wanted} does not exist")
    level = levels(found.steps)
    if output is Output.JSON:
        print_json(workflow_document(found, level))
        return
    named = f" {found.name!r}" if found.name is not None else ""
    counts = ", ".join(f"{n} {state}" for state, n in found.counts().items())
    total = len(found.steps)
    typer.echo(
        f"workflow {found.id}{named}, created {when(found.created_at)}: "
        f"{total} step{'' if total == 1 else 's'}{': ' + counts if counts else ''}"
    )
    if not found.steps:
        return
    steps = sorted(found.steps, key=lambda s: (level[s.id], s.id))
    print_table(
        ("LEVEL", "STEP", "ID", "TASK", "STATE", "ATTEMPT", "AFTER", "FINISHED AT", "ERROR"),
        [
            (
                str(level[s.id]),
                s.step,
                str(s.id),
                s.task,
                _state(s),
                f"{s.attempt}/{s.max_attempts}",
                _after(s.after),
                when(s.finished_at),
                s.error_type or "-",
            )
            for s in steps
        ],
    )


def _state(step: StepView) -> str:
    """waiting (n): queued until n parents finish; a cancel asked of a running step shows."""
    if step.waiting:
        return f"waiting ({step.deps_left})"
    if step.cancel_requested and step.state.value == "running":
        return "running (cancel requested)"
    return step.state.value


def _after(names: tuple[str, ...]) -> str:
    if not names:
        return "-"
    shown = ",".join(names[:AFTER_NAMED])
    more = len(names) - AFTER_NAMED
    return f"{shown} +{more:,} more" if more > 0 else shown


def workflow_document(found: WorkflowView, level: dict[int, int]) -> dict[str, Any]:
    """A workflow as ``--output json`` prints it: WorkflowView's fields, each step with its level
    and its counts by state ("waiting" apart from the other queued steps)."""
    import msgspec

    document: dict[str, Any] = msgspec.to_builtins(found)
    for step in document["steps"]:
        step["level"] = level[step["id"]]
    document["counts"] = found.counts()
    return document


@app.command("cancel")
@handled
@expand_options
def cancel(workflow: WorkflowIdArgument, target: Target = BY_OPTION) -> None:
    """Cancel every unfinished step of a workflow in one transaction: queued steps (waiting or
    ready) end cancelled now, running ones are asked to stop (as `jobs cancel`); finished steps
    stay as they are. Exit 1 when there is no such workflow or no step is unfinished."""
    from akadze.db.queries import Queries
    from akadze.workflow import cancel_workflow

    wanted = job_id(workflow, "workflow")
    application = target.database()
    hooks = application if application.hooks.on_transition else None

    async def act(conn: AsyncConnection) -> tuple[int, WorkflowView | None]:
        taken = await cancel_workflow(conn, wanted, app=hooks)
        return taken, await Queries.workflow_steps(conn, wanted)

    taken, after = with_conn(application, act)
    if after is None:
        fail(1, f"workflow {wanted} does not exist")
    if taken == 0:
        fail(1, f"workflow {wanted} has no unfinished step: nothing to cancel")
    running = sum(1 for s in after.steps if s.state.value == "running")
    said = f"workflow {wanted}: {taken - running} step{'' if taken - running == 1 else 's'} cancelled"
    if running:
        said += (
            f", {running} running step{'' if running == 1 else 's'} asked to stop (each ends cancelled "
            "unless it finishes first)"
        )
    typer.echo(said)
