"""The dashboard's pages (GET): read the database, render a template. Nothing here changes
anything; actions.py and bulk.py hold the POSTs, listing.py the jobs listing and search,
trends.py the trends.

Every read goes through ``reading(request)``: the one place that picks the connection the
dashboard reads on.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from sqlalchemy.ext.asyncio import AsyncConnection
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from akadze.db.queries import Queries
from akadze.db.stats import ScheduleRun
from akadze.job import Job, JobState
from akadze.schedule import next_fire_after
from akadze.web.render import TZ_COOKIE, render, zone
from akadze.web.security import cookie_path
from akadze.web.timeline import job_json, timeline

if TYPE_CHECKING:
    from akadze.web.application import Settings

#: the overview's throughput: jobs finished per minute over this many minutes
ACTIVITY_MINUTES = 5
#: fire times shown per schedule, ahead and behind
SCHEDULE_TIMES = 3
SCHEDULE_RUNS = 5
#: a waiting step's page links this many of the steps it waits for
WAITED_SHOWN = 10
#: ids are PostgreSQL bigints: a larger one names no job
MAX_JOB_ID = 2**63 - 1
#: what the page says after an action (?done=...); anything else in ?done is ignored
NOTICES: Mapping[str, str] = {
    "requeue": "The job is queued again.",
    "run-now": "The job is ready now.",
    "paused": "Queue paused: workers take no new job from it; running jobs finish.",
    "already-paused": "The queue was already paused.",
    "resumed": "Queue resumed: workers take jobs from it again.",
    "not-paused": "The queue was not paused.",
    "bulk-cancel": (
        "Cancel requested for {n} of {of} selected jobs: the queued ones are cancelled now; each "
        "running one is asked to stop, and ends succeeded if its run returns normally, cancelled "
        "if it raises."
    ),
    "bulk-requeue": "Requeued {n} of {of} selected jobs.",
    "workflow-cancel": (
        "Cancel took {n} unfinished steps of this workflow: the queued ones (waiting or ready) are "
        "cancelled now; each running one is asked to stop, and ends succeeded if its run returns "
        "normally, cancelled if it raises."
    ),
    "bulk-delete": "Deleted {n} of {of} selected jobs.",
}
#: what the page adds for the jobs a bulk action skipped, by reason (?held=, ?gone=)
SKIPPED: Mapping[str, str] = {
    "held": "{k} not requeued: another job holds its unique key; requeue once that job has finished.",
    "gone": "{k} had left the state the action applies to since the count was shown.",
}


class BadRequest(Exception):
    """A query parameter that cannot be used; the page says which and why (400)."""


def settings(request: Request) -> Settings:
    """The dashboard's Settings, from the Starlette app that ``build`` made."""
    found: Settings = request.app.state.dashboard
    return found


@contextlib.asynccontextmanager
async def reading(request: Request, *, primary: bool = False) -> AsyncIterator[AsyncConnection]:
    """A connection to read what a page shows (the one place that chooses it): the app's
    read engine, a streaming replica when it has one (read_database_url); ``primary`` for a
    read that must see what an action just did or refused (the replica may lag)."""
    app = settings(request).app
    async with (app.engine if primary else app.read_engine).connect() as conn:
        yield conn


def notice(request: Request, job: Job | None = None) -> str | None:
    """What the page says after an action, from ``?done=`` (and the job, after a cancel)."""
    done = request.query_params.get("done", "")
    if done == "cancel" and job is not None:
        return cancel_notice(job)
    text = NOTICES.get(done)
    if text is None:
        return None
    counts = {key: count(request.query_params.get(key)) for key in ("n", "of")}
    said = [text.format(**counts)]
    for reason, line in SKIPPED.items():
        skipped = count(request.query_params.get(reason))
        if skipped:
            said.append(line.format(k=skipped))
    return " ".join(said)


def cancel_notice(job: Job) -> str:
    """What a cancel did, and what will happen (docs/outcomes.md, Cancel)."""
    if job.state is JobState.CANCELLED:
        return "The job is cancelled: it will not run."
    if job.state is JobState.RUNNING:
        return (
            "Cancel requested. The job is running: its task is asked to stop "
            "(current().cancel_requested). If its run returns normally the job ends succeeded; "
            "if it raises, it ends cancelled."
        )
    if job.state is JobState.QUEUED:
        return "Cancel requested: the job ends cancelled when a worker takes it."
    return f"Cancel requested; the job has ended {job.state.value}."


def count(value: str | None) -> int:
    """A count from the query string (``?n=``, ``?of=``), 0 unless it is plain digits; a notice never
    fails on a tampered link."""
    return int(value) if value is not None and value.isdigit() and len(value) < 10 else 0


def job_id_of(raw: str) -> int | None:
    """A job id from a path or a form: digits naming a bigint, or None (no such job)."""
    raw = raw.strip().removeprefix("#")
    # at most 19 digits: a longer string is no bigint, and int() of a few thousand digits raises
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19:
        return None
    value = int(raw)
    return value if 0 < value <= MAX_JOB_ID else None


def positive_int(value: str | None, label: str) -> int | None:
    """A positive integer from the query string, or None when absent or empty; BadRequest naming
    ``label`` for anything else."""
    if value in (None, ""):
        return None
    assert value is not None
    if not value.isascii() or not value.isdigit() or len(value) > 18 or int(value) < 1:
        raise BadRequest(f"{label} must be a positive integer")
    return int(value)


def bad_request(request: Request, exc: BadRequest) -> Response:
    """The 400 page that says which parameter is wrong and why."""
    return render(request, "message.html", status_code=400, title="Bad request", message=str(exc))


def no_such_job(request: Request, raw: str) -> Response:
    """The 404 page for a job id that names no job (shown cut to 40 characters)."""
    shown = raw if len(raw) <= 40 else raw[:40] + "…"
    return render(request, "message.html", status_code=404, title="No such job", message=f"no job {shown}")


def redirect(request: Request, path: str) -> Response:
    """303 to ``path`` under the mount prefix."""
    return RedirectResponse(request.scope.get("root_path", "") + path, status_code=303)


async def overview(request: Request) -> Response:
    """GET /: each queue's counts, its throughput over the last ACTIVITY_MINUTES and its failures
    in the last hour, and the live workers."""
    s = settings(request)
    async with reading(request) as conn:
        stats = await Queries.queue_stats(conn, s.app.queues())
        activity = await Queries.queue_activity(conn, ACTIVITY_MINUTES)
        workers = await Queries.live_workers(conn, max_ids=0)
    return render(
        request, "overview.html", stats=stats, activity=activity, minutes=ACTIVITY_MINUTES, workers=workers
    )


async def find(request: Request) -> Response:
    """The header's "Job #": the job's page, or 404 saying there is no such job."""
    raw = request.query_params.get("id", "")
    job_id = job_id_of(raw)
    if job_id is None:
        return no_such_job(request, raw)
    return redirect(request, f"/jobs/{job_id}")


async def job(request: Request) -> Response:
    """GET /jobs/{id}: the job's row and timeline, and its arguments and result when the dashboard
    shows them and ``?show=args`` asks; 404 when no job has the id."""
    s = settings(request)
    raw: str = request.path_params["job_id"]
    job_id = job_id_of(raw)
    found = waits = None
    if job_id is not None:
        async with reading(request) as conn:
            found = await Queries.get_job(conn, job_id)
            if found is not None and found.workflow_id is not None and found.state is JobState.QUEUED:
                waits = await Queries.waited_steps(conn, job_id, limit=WAITED_SHOWN)
    if found is None:
        return no_such_job(request, raw)
    asked = request.query_params.get("show") == "args"
    now = datetime.now(UTC)
    return render(
        request,
        "job.html",
        job=found,
        events=timeline(found),
        waiting=found.state is JobState.QUEUED and found.run_at > now,
        waits=waits,
        shown=job_json(found) if asked and s.show_args else None,
        asked=asked,
        notice=notice(request, found),
        now=now,
    )


async def queues(request: Request) -> Response:
    """GET /queues: each queue's counts and pause, with the forms to pause and resume."""
    s = settings(request)
    async with reading(request) as conn:
        stats = await Queries.queue_stats(conn, s.app.queues())
    return render(request, "queues.html", stats=stats, notice=notice(request))


async def schedules(request: Request) -> Response:
    """GET /schedules: each schedule of the app with its next SCHEDULE_TIMES fire times (computed
    here) and its last SCHEDULE_RUNS recorded ones, with their jobs."""
    s = settings(request)
    declared = sorted(s.app.schedules.values(), key=lambda schedule: schedule.name)
    runs: dict[str, list[ScheduleRun]] = {schedule.name: [] for schedule in declared}
    if declared:
        async with reading(request) as conn:
            for run in await Queries.recent_schedule_runs(conn, list(runs), SCHEDULE_RUNS):
                runs[run.schedule].append(run)
    now = datetime.now(UTC)
    rows = []
    for schedule in declared:
        upcoming = [next_fire_after(schedule, now)]
        while len(upcoming) < SCHEDULE_TIMES:
            upcoming.append(next_fire_after(schedule, upcoming[-1]))
        rows.append((schedule, upcoming, runs[schedule.name]))
    return render(request, "schedules.html", rows=rows, now=now)


async def workers(request: Request) -> Response:
    """GET /workers: every live worker, its queues, heartbeat age and running jobs."""
    async with reading(request) as conn:
        live = await Queries.live_workers(conn)
    return render(request, "workers.html", workers=live)


def _back(request: Request) -> str:
    """Where to go once the zone is set: ``?back=`` (the zone page's own form) or the page the
    choice was made on (its Referer), when it is a page of this dashboard; else the overview."""
    base: str = request.scope.get("root_path", "")
    back = request.query_params.get("back", "")
    if not back:
        came = urlsplit(request.headers.get("referer", ""))
        if came.netloc == request.headers.get("host") and "/timezone" not in came.path:
            back = came.path + (f"?{came.query}" if came.query else "")
    # a path of this dashboard only: never another site (//host, \\host) or another app
    if not back.startswith(base + "/") or back.startswith("//") or "\\" in back:
        return base + "/"
    return back


async def timezone(request: Request) -> Response:
    """Sets the zone times are shown in (``?tz=``, a cookie) and goes back to the page the choice
    was made on; without a zone, a page to choose one."""
    from zoneinfo import available_timezones

    back = _back(request)
    name = request.query_params.get("tz", "")
    if not name:
        zones = sorted(available_timezones())
        return render(request, "timezone.html", zones=zones, back=back)
    if zone(name) is None:
        return bad_request(
            request, BadRequest(f"{name[:64]!r} is not a time zone (say UTC or Europe/Berlin)")
        )
    response = RedirectResponse(back, status_code=303)
    response.set_cookie(
        TZ_COOKIE,
        name,
        path=cookie_path(request),
        max_age=400 * 86_400,
        samesite="lax",
        secure=request.url.scheme == "https",
    )
    return response
