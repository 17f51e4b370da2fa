"""The trends page (GET /trends): throughput, failures and run times (p50, p95) over the last
hour, day or week, of every queue and task or of one, as charts and per task and per queue.

It reads only akadze_job_stats, which the workers' trends service fills from finished jobs once
a minute (akadze/worker/trends.py): the page shows what is rolled up, up to the mark it names,
never the jobs table itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from akadze.db.queries import Queries
from akadze.db.trends import STATES
from akadze.web import charts
from akadze.web.listing import job_filter
from akadze.web.pages import BadRequest, bad_request, reading, settings
from akadze.web.render import render, zone_of

#: each range: how far back, the slot of its charts, and whether it reads hour rows
RANGES: Mapping[str, tuple[timedelta, timedelta, bool]] = {
    "hour": (timedelta(hours=1), timedelta(minutes=1), False),
    "day": (timedelta(days=1), timedelta(hours=1), True),
    "week": (timedelta(days=7), timedelta(hours=1), True),
}


def _ceil(moment: datetime, slot: timedelta) -> datetime:
    """``moment`` rounded up to a whole slot (UTC)."""
    seconds = slot.total_seconds()
    epoch = moment.timestamp()
    return datetime.fromtimestamp(-(-epoch // seconds) * seconds, UTC)


async def trends(request: Request) -> Response:
    """GET /trends: throughput, failures and run times of the chosen range (hour, day, week), of all
    jobs or of one queue or task, up to the rollup's mark; 400 for an unknown range."""
    name = request.query_params.get("range") or "hour"
    if name not in RANGES:
        return bad_request(request, BadRequest(f"range must be one of {', '.join(RANGES)}"))
    try:
        chosen = job_filter({k: request.query_params.get(k, "") for k in ("task", "queue")})
    except BadRequest as exc:
        return bad_request(request, exc)
    span, slot, hourly = RANGES[name]
    async with reading(request) as conn:
        now, mark, _ = await Queries.job_stats_mark(conn)
        if mark is None:
            return render(request, "trends.html", empty=True, **_choices(request, name, now=now))
        until = _ceil(mark, slot)
        count = round(span / slot)
        since = until - count * slot
        slots = await Queries.trend_slots(
            conn, since=since, slot=slot, count=count, hourly=hourly, queue=chosen.queue, task=chosen.task
        )
        by_task, by_queue = await Queries.trend_totals(conn, since=since, until=mark, hourly=hourly)
    _, where = zone_of(request)
    label = charts.labeller(span.total_seconds(), where)
    whose = " of " + ", ".join(
        f"{kind} {value}" for kind, value in (("queue", chosen.queue), ("task", chosen.task)) if value
    )
    whose = whose if chosen.queue or chosen.task else ""
    return render(
        request,
        "trends.html",
        empty=False,
        mark=mark,
        since=since,
        slots=slots,
        throughput=charts.bars(f"Jobs finished per {_per(slot)}{whose}", slots, STATES, label),
        failures=charts.bars(f"Jobs failed per {_per(slot)}{whose}", slots, ("failed",), label),
        run_times=charts.run_times(f"Run time p50 and p95 per {_per(slot)}{whose}", slots, label),
        by_task=by_task,
        by_queue=by_queue,
        label=label,
        **_choices(request, name, now=now),
    )


def _per(slot: timedelta) -> str:
    return "minute" if slot < timedelta(hours=1) else "hour"


def _choices(request: Request, name: str, *, now: datetime) -> dict[str, Any]:
    """What the page's range links and filter form show."""
    app = settings(request).app
    return {
        "range": name,
        "ranges": list(RANGES),
        "task": request.query_params.get("task", ""),
        "queue": request.query_params.get("queue", ""),
        "tasks": sorted(app.tasks),
        "queues": app.queues(),
        "now": now,
    }
