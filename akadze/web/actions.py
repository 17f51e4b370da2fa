"""The dashboard's actions (POST): each checks the mode and the CSRF token before it reads its
form, acts through the library's own functions (akadze.control, app.pause_queue, run_now), and
redirects to a page that says what changed, or answers 409 saying why nothing did.

The log lines name the action, the job id or queue and the count: never an argument or result.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from akadze.control import request_cancel, requeue as requeue_job
from akadze.db.queries import Queries
from akadze.errors import AkadzeError
from akadze.web.pages import (
    BULK_LIMIT,
    MAX_JOB_ID,
    BadRequest,
    bad_request,
    bulk_filter,
    job_filter,
    positive_int,
    settings,
)
from akadze.web.render import query, render, segment
from akadze.web.security import CSRF_FIELD, csrf_refusal

if TYPE_CHECKING:
    from akadze.app import Akadze

logger = logging.getLogger("akadze.web")

#: a form is a few fields; anything larger is not ours
MAX_FORM_BYTES = 16 * 1024


class Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def _checked_form(request: Request) -> dict[str, str]:
    """The form's fields, once the mode, the size and the CSRF token allow the action."""
    if settings(request).read_only:
        raise Refused(403, "this dashboard is read-only: it changes nothing")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            raise Refused(413, "the form is too large")
    try:
        form = dict(parse_qsl(body.decode(), keep_blank_values=True, max_num_fields=20))
    except (UnicodeDecodeError, ValueError):
        raise Refused(400, "the form cannot be read") from None
    refusal = csrf_refusal(request, form.get(CSRF_FIELD))
    if refusal is not None:
        raise Refused(403, refusal)
    return form


def _refused(request: Request, exc: Refused) -> Response:
    logger.warning("dashboard refused %s %s: %s", request.method, request.url.path, exc)
    return render(request, "message.html", status_code=exc.status, title="Refused", message=str(exc))


def _redirect(request: Request, path: str) -> Response:
    return RedirectResponse(request.scope.get("root_path", "") + path, status_code=303)


async def _not_applied(request: Request, job_id: int, what: str) -> Response:
    async with settings(request).app.engine.connect() as conn:
        job = await Queries.get_job(conn, job_id) if job_id <= MAX_JOB_ID else None
    state = f"job {job_id} is {job.state.value}" if job is not None else f"there is no job {job_id}"
    return render(
        request, "message.html", status_code=409, title="Nothing changed", message=f"{what}; {state}"
    )


#: one job's action: act on the job in the open transaction; True when something changed
JobAction = Callable[[AsyncConnection, int, "Akadze"], Awaitable[bool]]


async def _job_action(
    request: Request, action: str, not_applied: str, act: JobAction, *, refusable: bool = False
) -> Response:
    """The one way a job's action runs: the form checks, ``act`` in one transaction, the log
    line, then the job's page, or 409 saying why nothing changed (``not_applied`` and the job's
    state; with ``refusable``, the library's own refusal, an AkadzeError, by its message)."""
    job_id: int = request.path_params["job_id"]
    try:
        await _checked_form(request)
    except Refused as exc:
        return _refused(request, exc)
    if job_id > MAX_JOB_ID:
        return await _not_applied(request, job_id, not_applied)
    app = settings(request).app
    try:
        async with app.engine.begin() as conn:
            changed = await act(conn, job_id, app)
    except AkadzeError as exc:
        if not refusable:
            raise
        logger.info("dashboard: %s job_id=%d refused (%s)", action, job_id, type(exc).__name__)
        return render(request, "message.html", status_code=409, title="Nothing changed", message=str(exc))
    logger.info("dashboard: %s job_id=%d changed=%s", action, job_id, changed)
    if not changed:
        return await _not_applied(request, job_id, not_applied)
    return _redirect(request, f"/jobs/{job_id}?done={action}")


async def cancel(request: Request) -> Response:
    async def act(conn: AsyncConnection, job_id: int, app: Akadze) -> bool:
        return await request_cancel(conn, job_id, app=app)

    return await _job_action(request, "cancel", "only a queued or running job can be cancelled", act)


async def requeue(request: Request) -> Response:
    async def act(conn: AsyncConnection, job_id: int, app: Akadze) -> bool:
        return await requeue_job(conn, job_id, app=app) is not None

    return await _job_action(request, "requeue", "only a failed job can be requeued", act, refusable=True)


async def run_now(request: Request) -> Response:
    async def act(conn: AsyncConnection, job_id: int, app: Akadze) -> bool:
        return await Queries.run_now(conn, job_id)

    return await _job_action(request, "run-now", "only a queued job waiting for its run_at can run now", act)


async def pause(request: Request) -> Response:
    return await _pause_or_resume(request, pause=True)


async def resume(request: Request) -> Response:
    return await _pause_or_resume(request, pause=False)


async def _pause_or_resume(request: Request, *, pause: bool) -> Response:
    name: str = request.path_params["name"]
    try:
        await _checked_form(request)
    except Refused as exc:
        return _refused(request, exc)
    app = settings(request).app
    try:
        changed = await (app.pause_queue(name) if pause else app.resume_queue(name))
    except AkadzeError as exc:
        return bad_request(request, BadRequest(str(exc)))
    logger.info("dashboard: %s queue changed=%s", "pause" if pause else "resume", changed)
    done = ("paused" if changed else "already-paused") if pause else ("resumed" if changed else "not-paused")
    return _redirect(request, f"/queues?done={done}#queue-{segment(name)}")


async def bulk(request: Request) -> Response:
    """Cancels or requeues what the confirmed filter selects: at most the confirmed count and
    BULK_LIMIT, and no job newer than the confirmation saw (max_id), in one transaction."""
    try:
        form = await _checked_form(request)
        action = form.get("action", "")
        eligible = bulk_filter(job_filter(form), action)
        max_id = positive_int(form.get("max_id"), "max_id")
        count = positive_int(form.get("count"), "count")
    except Refused as exc:
        return _refused(request, exc)
    except BadRequest as exc:
        return bad_request(request, exc)
    app = settings(request).app
    changed = selected = 0
    if eligible is not None and max_id is not None and count is not None:
        async with app.engine.begin() as conn:
            found = await Queries.job_summaries(
                conn, eligible, before=max_id + 1, limit=min(count, BULK_LIMIT)
            )
            selected = len(found)
            for summary in found:
                try:
                    # a savepoint each: a job the library refuses (AkadzeError) is skipped alone
                    async with conn.begin_nested():
                        if action == "cancel":
                            changed += await request_cancel(conn, summary.id, app=app)
                        else:
                            changed += await requeue_job(conn, summary.id, app=app) is not None
                except AkadzeError:
                    continue
    logger.info("dashboard: bulk %s selected=%d changed=%d", action, selected, changed)
    back = query(
        state=form.get("state"), task=form.get("task"), queue=form.get("queue"), done=f"bulk-{action}"
    )
    return _redirect(request, f"/jobs{back}&n={changed}&of={selected}")
