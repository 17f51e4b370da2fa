"""The dashboard's single actions (POST): each checks the mode and the CSRF token before it reads
its form, acts through the library's own functions (akadze.control, app.pause_queue, run_now),
and redirects to a page that says what changed, or answers 409 saying why nothing did.

The log lines (logger ``akadze.web``) name the action, the job id or the queue, and what changed:
never an argument or result.

A queue named ``.`` or ``..`` cannot travel as a path segment: browsers resolve it (a form
posting to ``/queues/../resume`` goes to ``/resume``). The queues page posts those to
``/queues/pause`` and ``/queues/resume`` with the name in the form's ``queue`` field, which
works for every name.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.requests import Request
from starlette.responses import Response

from akadze.control import request_cancel, requeue as requeue_job
from akadze.db.queries import Queries
from akadze.errors import AkadzeError
from akadze.web.pages import BadRequest, bad_request, job_id_of, reading, redirect, settings
from akadze.web.render import render, segment
from akadze.web.security import CSRF_FIELD, csrf_refusal

if TYPE_CHECKING:
    from akadze.app import Akadze

logger = logging.getLogger("akadze.web")

#: a form is a few fields; anything larger is not ours
MAX_FORM_BYTES = 16 * 1024
#: names a browser resolves as a path segment (queues so named post their name in the form)
DOT_SEGMENTS = (".", "..")


class Refused(Exception):
    """Why a POST may not act (read-only dashboard, a form too large or unreadable, a bad CSRF
    token or origin), with the HTTP status to answer; ``refused()`` turns it into the page."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def checked_form(request: Request) -> dict[str, str]:
    """The form's fields, once the mode, the size and the CSRF token allow the action."""
    s = settings(request)
    if s.read_only or s.keys is None:
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
    refusal = csrf_refusal(request, form.get(CSRF_FIELD), s.keys.key)
    if refusal is not None:
        raise Refused(403, refusal)
    return form


def refused(request: Request, exc: Refused) -> Response:
    """The refusal's page, with its status (400, 403, 413), after a warning in the log naming the
    method and path; nothing was changed."""
    logger.warning("dashboard refused %s %s: %s", request.method, request.url.path, exc)
    return render(request, "message.html", status_code=exc.status, title="Refused", message=str(exc))


async def _not_applied(request: Request, job_id: int | None, raw: str, what: str) -> Response:
    job = None
    if job_id is not None:
        # the state the action met, on the primary
        async with reading(request, primary=True) as conn:
            job = await Queries.get_job(conn, job_id)
    shown = raw if len(raw) <= 40 else raw[:40] + "…"
    state = f"job {job_id} {job.state.phrase}" if job is not None else f"there is no job {shown}"
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
    raw: str = request.path_params["job_id"]
    try:
        await checked_form(request)
    except Refused as exc:
        return refused(request, exc)
    job_id = job_id_of(raw)
    if job_id is None:
        return await _not_applied(request, None, raw, not_applied)
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
        return await _not_applied(request, job_id, raw, not_applied)
    return redirect(request, f"/jobs/{job_id}?done={action}")


async def cancel(request: Request) -> Response:
    """POST /jobs/{id}/cancel: cancel a queued job, or ask a running one to stop; then the job's
    page, whose notice says what follows, or 409 when the job is in no state a cancel changes."""

    async def act(conn: AsyncConnection, job_id: int, app: Akadze) -> bool:
        return await request_cancel(conn, job_id, app=app)

    return await _job_action(request, "cancel", "only a queued or running job can be cancelled", act)


async def requeue(request: Request) -> Response:
    """POST /jobs/{id}/requeue: put a failed or cancelled job back in its queue; then the job's
    page, or 409 when the job is neither or another job holds its unique key (the message says
    which)."""

    async def act(conn: AsyncConnection, job_id: int, app: Akadze) -> bool:
        return await requeue_job(conn, job_id, app=app) is not None

    return await _job_action(
        request, "requeue", "only a failed or cancelled job can be requeued", act, refusable=True
    )


async def run_now(request: Request) -> Response:
    """POST /jobs/{id}/run-now: make a queued job waiting for its run_at ready at once; then the
    job's page, or 409 when the job is not waiting."""

    async def act(conn: AsyncConnection, job_id: int, app: Akadze) -> bool:
        return await Queries.run_now(conn, job_id)

    return await _job_action(request, "run-now", "only a queued job waiting for its run_at can run now", act)


async def pause(request: Request) -> Response:
    """POST /queues/{name}/pause (or the name in the form): workers take no new job from the queue;
    running jobs finish. Back to the queues page, which says whether it was already paused."""
    return await _pause_or_resume(request, pause=True)


async def resume(request: Request) -> Response:
    """POST /queues/{name}/resume (or the name in the form): workers take jobs from the queue again.
    Back to the queues page, which says whether it was paused at all."""
    return await _pause_or_resume(request, pause=False)


async def _pause_or_resume(request: Request, *, pause: bool) -> Response:
    try:
        form = await checked_form(request)
    except Refused as exc:
        return refused(request, exc)
    # /queues/{name}/pause, or /queues/pause with the name in the form (DOT_SEGMENTS)
    name: str | None = request.path_params.get("name", form.get("queue"))
    if name is None:
        return bad_request(request, BadRequest("the form names no queue"))
    app = settings(request).app
    try:
        changed = await (app.pause_queue(name) if pause else app.resume_queue(name))
    except AkadzeError as exc:
        return bad_request(request, BadRequest(str(exc)))
    logger.info("dashboard: %s queue=%r changed=%s", "pause" if pause else "resume", name, changed)
    done = ("paused" if changed else "already-paused") if pause else ("resumed" if changed else "not-paused")
    return redirect(request, f"/queues?done={done}#queue-{segment(name)}")
