"""The dashboard's pages (GET): read the database, render a template. Nothing here changes
anything; actions.py holds the POSTs."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response

from akadze.db.queries import Queries
from akadze.db.stats import JobFilter, ScheduleRun
from akadze.errors import ConfigError
from akadze.job import JobState, check_name
from akadze.schedule import next_fire_after
from akadze.web.render import render
from akadze.web.timeline import job_json, timeline

if TYPE_CHECKING:
    from akadze.web.application import Settings

#: jobs on one page of the listing
PAGE_SIZE = 50
#: the overview's throughput: jobs finished per minute over this many minutes
ACTIVITY_MINUTES = 5
#: a bulk action takes at most this many jobs (the newest); run it again for the rest
BULK_LIMIT = 1000
#: fire times shown per schedule, ahead and behind
SCHEDULE_TIMES = 3
SCHEDULE_RUNS = 5
#: ids are PostgreSQL bigints: a larger one names no job
MAX_JOB_ID = 2**63 - 1
#: what each bulk action may change: cancel takes active jobs, requeue failed ones
BULK_STATES: Mapping[str, tuple[JobState, ...]] = {
    "cancel": (JobState.QUEUED, JobState.RUNNING),
    "requeue": (JobState.FAILED,),
}
#: what the page says after an action (?done=...); anything else in ?done is ignored
NOTICES: Mapping[str, str] = {
    "cancel": "Cancel requested: a queued job is cancelled now, a running one when its run ends.",
    "requeue": "The job is queued again.",
    "run-now": "The job is ready now.",
    "paused": "Queue paused: workers take no new job from it; running jobs finish.",
    "already-paused": "The queue was already paused.",
    "resumed": "Queue resumed: workers take jobs from it again.",
    "not-paused": "The queue was not paused.",
    "bulk-cancel": "Cancel requested for {n} of {of} selected jobs.",
    "bulk-requeue": "Requeued {n} of {of} selected jobs.",
}


class BadRequest(Exception):
    """A query parameter that cannot be used; the page says which and why (400)."""


def settings(request: Request) -> Settings:
    found: Settings = request.app.state.dashboard
    return found


def notice(request: Request) -> str | None:
    text = NOTICES.get(request.query_params.get("done", ""))
    if text is None:
        return None
    counts = {key: _count(request.query_params.get(key)) for key in ("n", "of")}
    return text.format(**counts)


def _count(value: str | None) -> int:
    return int(value) if value is not None and value.isdigit() and len(value) < 10 else 0


def job_filter(params: Mapping[str, str]) -> JobFilter:
    """The listing's filter from ``state``, ``task`` and ``queue`` (empty means any)."""
    state = params.get("state") or None
    if state is not None and state not in JobState.__members__.values():
        raise BadRequest(f"state must be one of {', '.join(JobState)}")
    names = {label: params.get(label) or None for label in ("task", "queue")}
    for label, value in names.items():
        if value is not None:
            try:
                check_name(label, value)
            except ConfigError as exc:
                raise BadRequest(str(exc)) from None
    return JobFilter((JobState(state),) if state else (), names["task"], names["queue"])


def bulk_filter(where: JobFilter, action: str) -> JobFilter | None:
    """The jobs of ``where`` that ``action`` may change; None when it can change none of them
    (say, requeue with state=succeeded)."""
    if action not in BULK_STATES:
        raise BadRequest("action must be cancel or requeue")
    allowed = BULK_STATES[action]
    states = tuple(s for s in where.states if s in allowed) if where.states else allowed
    return JobFilter(states, where.task, where.queue) if states else None


def positive_int(value: str | None, label: str) -> int | None:
    if value in (None, ""):
        return None
    assert value is not None
    if not value.isdigit() or len(value) > 18 or int(value) < 1:
        raise BadRequest(f"{label} must be a positive integer")
    return int(value)


def bad_request(request: Request, exc: BadRequest) -> Response:
    return render(request, "message.html", status_code=400, title="Bad request", message=str(exc))


async def overview(request: Request) -> Response:
    s = settings(request)
    async with s.app.engine.connect() as conn:
        stats = await Queries.queue_stats(conn, s.app.queues())
        activity = await Queries.queue_activity(conn, ACTIVITY_MINUTES)
        workers = await Queries.live_workers(conn, max_ids=0)
    template = "live.html" if request.query_params.get("fragment") == "live" else "overview.html"
    return render(
        request,
        template,
        stats=stats,
        activity=activity,
        minutes=ACTIVITY_MINUTES,
        workers=workers,
        now=datetime.now(UTC),
    )


async def jobs(request: Request) -> Response:
    s = settings(request)
    try:
        where = job_filter(request.query_params)
        before = positive_int(request.query_params.get("before"), "before")
    except BadRequest as exc:
        return bad_request(request, exc)
    async with s.app.engine.connect() as conn:
        found = await Queries.job_summaries(conn, where, before=before, limit=PAGE_SIZE + 1)
    page, more = found[:PAGE_SIZE], len(found) > PAGE_SIZE
    return render(
        request,
        "jobs.html",
        jobs=page,
        older=page[-1].id if more else None,
        paged=before is not None,
        state=where.states[0].value if where.states else "",
        task=where.task or "",
        queue=where.queue or "",
        states=list(JobState),
        tasks=sorted(s.app.tasks),
        queues=s.app.queues(),
        notice=notice(request),
    )


async def bulk(request: Request) -> Response:
    """The confirmation of a bulk action: how many jobs it takes, and the form that does it."""
    s = settings(request)
    try:
        where = job_filter(request.query_params)
        action = request.query_params.get("action", "")
        eligible = bulk_filter(where, action)
    except BadRequest as exc:
        return bad_request(request, exc)
    found = []
    if eligible is not None:
        async with s.app.engine.connect() as conn:
            found = await Queries.job_summaries(conn, eligible, limit=BULK_LIMIT + 1)
    return render(
        request,
        "bulk.html",
        action=action,
        count=min(len(found), BULK_LIMIT),
        more=len(found) > BULK_LIMIT,
        limit=BULK_LIMIT,
        max_id=found[0].id if found else 0,
        states=", ".join(eligible.states) if eligible else "",
        state=where.states[0].value if where.states else "",
        task=where.task or "",
        queue=where.queue or "",
    )


async def job(request: Request) -> Response:
    s = settings(request)
    job_id = request.path_params["job_id"]
    found = None
    if job_id <= MAX_JOB_ID:
        async with s.app.engine.connect() as conn:
            found = await Queries.get_job(conn, job_id)
    if found is None:
        return render(
            request, "message.html", status_code=404, title="No such job", message=f"no job {job_id}"
        )
    asked = request.query_params.get("show") == "args"
    now = datetime.now(UTC)
    return render(
        request,
        "job.html",
        job=found,
        events=timeline(found),
        waiting=found.state is JobState.QUEUED and found.run_at > now,
        shown=job_json(found) if asked and s.show_args else None,
        asked=asked,
        notice=notice(request),
    )


async def queues(request: Request) -> Response:
    s = settings(request)
    async with s.app.engine.connect() as conn:
        stats = await Queries.queue_stats(conn, s.app.queues())
    return render(request, "queues.html", stats=stats, notice=notice(request))


async def schedules(request: Request) -> Response:
    s = settings(request)
    declared = sorted(s.app.schedules.values(), key=lambda schedule: schedule.name)
    runs: dict[str, list[ScheduleRun]] = {schedule.name: [] for schedule in declared}
    if declared:
        async with s.app.engine.connect() as conn:
            for run in await Queries.recent_schedule_runs(conn, list(runs), SCHEDULE_RUNS):
                runs[run.schedule].append(run)
    now = datetime.now(UTC)
    rows = []
    for schedule in declared:
        upcoming = [next_fire_after(schedule, now)]
        while len(upcoming) < SCHEDULE_TIMES:
            upcoming.append(next_fire_after(schedule, upcoming[-1]))
        rows.append((schedule, upcoming, runs[schedule.name]))
    return render(request, "schedules.html", rows=rows)


async def workers(request: Request) -> Response:
    s = settings(request)
    async with s.app.engine.connect() as conn:
        live = await Queries.live_workers(conn)
    return render(request, "workers.html", workers=live)
