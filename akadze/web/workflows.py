"""A workflow's page (GET /workflows/{id}): its graph drawn (web/graph.py), its steps listed, and
the cancel of the whole workflow: a confirmation that counts the unfinished steps (GET
/workflows/{id}/cancel), then the POST, which takes them through ``akadze.cancel_workflow``
(on_transition hooks run) in one transaction, which rolls back when it took more steps than the
count the operator confirmed (a requeue reopened some since): then nothing changes and the page
says so.

The log line (logger ``akadze.web``) names the workflow and what changed, never an argument.
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response

from akadze.db.graph import WorkflowView, levels
from akadze.db.queries import Queries
from akadze.web.actions import Refused, checked_form, refused
from akadze.web.graph import layout, svg
from akadze.web.pages import (
    BadRequest,
    bad_request,
    job_id_of,
    notice,
    positive_int,
    reading,
    redirect,
    settings,
)
from akadze.web.render import render
from akadze.workflow import cancel_workflow

logger = logging.getLogger("akadze.web")

#: the page's table lists at most this many steps (level by level); `akadze workflows show` all
TABLE_STEPS = 500


def no_such_workflow(request: Request, raw: str, *, status: int = 404) -> Response:
    """The page saying there is no workflow ``raw`` (404; 409 for an action on it)."""
    shown = raw if len(raw) <= 40 else raw[:40] + "…"
    return render(
        request, "message.html", status_code=status, title="No such workflow", message=f"no workflow {shown}"
    )


async def _read(request: Request, *, primary: bool = False) -> tuple[str, WorkflowView | None]:
    raw: str = request.path_params["workflow_id"]
    workflow_id = job_id_of(raw)
    if workflow_id is None:
        return raw, None
    async with reading(request, primary=primary) as conn:
        return raw, await Queries.workflow_steps(conn, workflow_id)


async def workflow(request: Request) -> Response:
    """The graph, the counts by state, the steps level by level, and "Cancel workflow…"."""
    raw, found = await _read(request)
    if found is None:
        return no_such_workflow(request, raw)
    level = levels(found.steps)
    drawing = layout(found.steps, level)
    name = f" {found.name}" if found.name else ""
    base: str = request.scope.get("root_path", "")
    steps = sorted(found.steps, key=lambda s: (level[s.id], s.id))
    return render(
        request,
        "workflow.html",
        workflow=found,
        counts=found.counts(),
        graph=svg(drawing, base, f"workflow {found.id}{name}: its steps and what each waits for"),
        drawing=drawing,
        steps=steps[:TABLE_STEPS],
        listed=min(len(steps), TABLE_STEPS),
        level=level,
        notice=notice(request),
    )


async def confirm_cancel(request: Request) -> Response:
    """How many steps a cancel of the workflow takes, and the form that does it."""
    raw, found = await _read(request)
    if found is None:
        return no_such_workflow(request, raw)
    counts = found.counts()
    return render(
        request,
        "workflow_cancel.html",
        workflow=found,
        count=found.unfinished,
        waiting=counts.get("waiting", 0),
        queued=counts.get("queued", 0),
        running=counts.get("running", 0),
    )


async def cancel(request: Request) -> Response:
    """Cancels every unfinished step, if they are at most the confirmed count (else 409, nothing
    changed)."""
    raw: str = request.path_params["workflow_id"]
    try:
        form = await checked_form(request)
        count = positive_int(form.get("count"), "count")
    except Refused as exc:
        return refused(request, exc)
    except BadRequest as exc:
        return bad_request(request, exc)
    workflow_id = job_id_of(raw)
    if workflow_id is None or count is None:
        return no_such_workflow(request, raw, status=409)
    app = settings(request).app
    found: WorkflowView | None = None
    changed = 0
    async with app.engine.connect() as conn, conn.begin() as transaction:
        found = await Queries.workflow_steps(conn, workflow_id)
        if found is not None:
            changed = await cancel_workflow(conn, workflow_id, app=app)
        if changed > count:
            # a requeue reopened steps since the count: roll back (hooks and events too)
            await transaction.rollback()
    name = found.name if found is not None else None
    taken = changed if changed <= count else 0
    logger.info(
        "dashboard: cancel workflow workflow_id=%d name=%r confirmed=%d unfinished=%d changed=%d",
        workflow_id,
        name,
        count,
        changed,
        taken,
    )
    if found is None:
        return no_such_workflow(request, raw, status=409)
    if changed > count:
        message = (
            f"{changed} steps of workflow {workflow_id} are unfinished now, more than the {count} "
            "confirmed (a requeue reopened some): nothing was cancelled; confirm again"
        )
        return render(request, "message.html", status_code=409, title="Nothing changed", message=message)
    if not changed:
        message = f"workflow {workflow_id} has no unfinished step: nothing to cancel"
        return render(request, "message.html", status_code=409, title="Nothing changed", message=message)
    return redirect(request, f"/workflows/{workflow_id}?done=workflow-cancel&n={changed}")
