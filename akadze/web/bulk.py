"""Bulk actions: cancel, requeue or delete what a filter selects, or the jobs ticked in a listing.

GET /jobs/bulk shows how many jobs the action would take; its form carries that count and the
newest id seen, and POST /jobs/bulk takes at most that many, none newer, at most BULK_LIMIT,
in one transaction. Cancel and requeue go through akadze.control (on_transition hooks run), a
savepoint each, so a job the library refuses (a requeue whose unique key another job holds) is
skipped alone and the page says why; delete takes finished jobs only, in one statement.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.requests import Request
from starlette.responses import Response

from akadze.control import request_cancel, requeue as requeue_job
from akadze.db.listing import JobFilter, JobSummary
from akadze.db.queries import Queries
from akadze.errors import AkadzeError, UniqueConflictError
from akadze.job import FINISHED_STATES, JobState
from akadze.web.actions import Refused, checked_form, refused
from akadze.web.listing import FILTER_FIELDS, filter_params, job_filter, selected_ids
from akadze.web.pages import BadRequest, bad_request, positive_int, reading, redirect, settings
from akadze.web.render import query, render, zone_of

logger = logging.getLogger("akadze.web")

#: a bulk action takes at most this many jobs (the newest); run it again for the rest
BULK_LIMIT = 1000
#: a bulk action whose filter searches text reads at most this many jobs of the other filters
BULK_SCAN = 20_000
#: what each bulk action may change: cancel takes active jobs, requeue failed and cancelled
#: ones, delete finished ones
BULK_STATES: Mapping[str, tuple[JobState, ...]] = {
    "cancel": (JobState.QUEUED, JobState.RUNNING),
    "requeue": (JobState.FAILED, JobState.CANCELLED),
    "delete": FINISHED_STATES,
}


def bulk_filter(where: JobFilter, action: str) -> JobFilter | None:
    """The jobs of ``where`` that ``action`` may change; None when it can change none of them
    (say, requeue with state=succeeded)."""
    if action not in BULK_STATES:
        raise BadRequest("action must be cancel, requeue or delete")
    allowed = BULK_STATES[action]
    states = tuple(s for s in where.states if s in allowed) if where.states else allowed
    if not states:
        return None
    return JobFilter(
        states,
        where.task,
        where.queue,
        finished_from=where.finished_from,
        finished_to=where.finished_to,
        error=where.error,
        arg=where.arg,
        ids=where.ids,
    )


def _chosen(
    request: Request, params: Mapping[str, str], ids: list[str]
) -> tuple[str, JobFilter, JobFilter | None]:
    """The action, the filter (or selection) as asked, and what the action may take of it."""
    action = params.get("action", "")
    picked = selected_ids(ids)
    if picked:
        where = JobFilter(ids=picked)
    else:
        _, zone = zone_of(request)
        where = job_filter(params, where=zone, show_args=settings(request).show_args)
    return action, where, bulk_filter(where, action)


async def confirm(request: Request) -> Response:
    """The confirmation: how many jobs the action takes, and the form that does it."""
    try:
        ids = request.query_params.getlist("id") + request.query_params.getlist("ids")
        action, where, eligible = _chosen(request, request.query_params, ids)
    except BadRequest as exc:
        return bad_request(request, exc)
    found: list[JobSummary] = []
    more = False
    if eligible is not None:
        async with reading(request) as conn:
            page = await Queries.job_page(conn, eligible, limit=BULK_LIMIT, scan=_scan(eligible))
        found, more = page.jobs, page.next is not None
    return render(
        request,
        "bulk.html",
        action=action,
        count=len(found),
        more=more,
        limit=BULK_LIMIT,
        scan=_scan(eligible) if eligible is not None else None,
        max_id=max((job.id for job in found), default=0),
        states=", ".join(eligible.states) if eligible else "",
        selected=",".join(map(str, where.ids)),
        filters=filter_params(request.query_params),
    )


def _scan(where: JobFilter) -> int | None:
    return BULK_SCAN if where.searches_text else None


async def bulk(request: Request) -> Response:
    """Takes what the confirmed filter or selection selects: at most the confirmed count and
    BULK_LIMIT, and no job newer than the confirmation saw (max_id), in one transaction."""
    try:
        form = await checked_form(request)
        action, where, eligible = _chosen(request, form, [form.get("ids", "")])
        max_id = positive_int(form.get("max_id"), "max_id")
        count = positive_int(form.get("count"), "count")
    except Refused as exc:
        return refused(request, exc)
    except BadRequest as exc:
        return bad_request(request, exc)
    app = settings(request).app
    done: list[int] = []
    skipped = {"held": 0, "gone": 0}
    selected: list[JobSummary] = []
    if eligible is not None and max_id is not None and count is not None:
        async with app.engine.begin() as conn:
            page = await Queries.job_page(
                conn, eligible, limit=min(count, BULK_LIMIT), scan=_scan(eligible), max_id=max_id
            )
            selected = page.jobs
            done = await _act(conn, action, [job.id for job in selected], skipped, request)
    skipped["gone"] = len(selected) - len(done) - skipped["held"]
    logger.info(
        "dashboard: bulk %s state=%s task=%r queue=%r selected=%d changed=%d skipped_unique=%d "
        "skipped_gone=%d job_ids=%s",
        action,
        ",".join(eligible.states) if eligible else "-",
        where.task,
        where.queue,
        len(selected),
        len(done),
        skipped["held"],
        skipped["gone"],
        ",".join(map(str, done)) or "-",
    )
    kept = {name: form.get(name, "") for name in FILTER_FIELDS} if not where.ids else {}
    counts = {"n": len(done), "of": len(selected), **{k: v for k, v in skipped.items() if v}}
    return redirect(request, "/jobs" + query(**kept, done=f"bulk-{action}", **counts))


async def _act(
    conn: AsyncConnection, action: str, ids: list[int], skipped: dict[str, int], request: Request
) -> list[int]:
    """Applies ``action`` to ``ids`` in the open transaction; returns the ids it changed and
    counts in ``skipped`` the jobs the library refused because of a unique key."""
    if action == "delete":
        return await Queries.delete_finished_jobs(conn, ids) if ids else []
    app = settings(request).app
    changed: list[int] = []
    for job_id in ids:
        try:
            # a savepoint each: a job the library refuses (AkadzeError) is skipped alone
            async with conn.begin_nested():
                if action == "cancel":
                    did = await request_cancel(conn, job_id, app=app)
                else:
                    did = await requeue_job(conn, job_id, app=app) is not None
        except UniqueConflictError:
            skipped["held"] += 1
            continue
        except AkadzeError:
            continue
        if did:
            changed.append(job_id)
    return changed
