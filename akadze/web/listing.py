"""The jobs listing and search (GET /jobs): the filter read from the query string, a page of
what it selects (db/listing.py composes the statement), and the links to the next page.

A time range (``from``, ``to``) selects finished jobs by when they finished, newest finished
first; error text (``error``) and an argument value (``arg``, only where the dashboard shows
arguments) are searched in a bounded window (SEARCH_WINDOW jobs a page),
and the page says how far it looked.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, tzinfo

from starlette.requests import Request
from starlette.responses import Response

from akadze.db.listing import ArgMatch, Cursor, JobFilter, JobPage
from akadze.db.queries import Queries
from akadze.errors import ConfigError
from akadze.job import FINISHED_STATES, JobState, check_name
from akadze.web.pages import BadRequest, bad_request, job_id_of, notice, positive_int, reading, settings
from akadze.web.render import render, zone_of

#: jobs on one page of the listing
PAGE_SIZE = 50
#: a text search (error, argument) reads at most this many jobs per page (of its state and time range)
SEARCH_WINDOW = 5000
#: the longest error text or argument value searched for
MAX_SEARCH_TEXT = 500
#: the query parameters of a filter (and of the forms that carry one)
FILTER_FIELDS = ("state", "task", "queue", "from", "to", "error", "arg")


def job_filter(params: Mapping[str, str], *, where: tzinfo = UTC, show_args: bool = True) -> JobFilter:
    """The filter of the query string (or a form): each field empty means any."""
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
    states = (JobState(state),) if state else ()
    finished_from = moment(params.get("from"), "from", where)
    finished_to = moment(params.get("to"), "to", where)
    if (finished_from or finished_to) and states and states[0] not in FINISHED_STATES:
        raise BadRequest(
            "a time range selects finished jobs by when they finished: choose succeeded, failed, "
            "cancelled or any state"
        )
    error = search_text(params.get("error"), "error")
    arg = search_text(params.get("arg"), "arg")
    if arg is not None and not show_args:
        raise BadRequest("this dashboard does not show arguments, so it does not search them")
    return JobFilter(
        states,
        names["task"],
        names["queue"],
        finished_from=finished_from,
        finished_to=finished_to,
        error=error,
        arg=arg_match(arg) if arg is not None else None,
    )


def moment(value: str | None, label: str, where: tzinfo) -> datetime | None:
    """A time from a form: ISO 8601, in the page's zone when it names none."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise BadRequest(f"{label} must be a date and time, say 2026-01-31T14:00") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=where)


def search_text(value: str | None, label: str) -> str | None:
    """A search box's text, stripped; None when empty. BadRequest (naming ``label``) over
    MAX_SEARCH_TEXT characters or with a NUL, which PostgreSQL's text cannot hold."""
    if value is None or not value.strip():
        return None
    if len(value) > MAX_SEARCH_TEXT:
        raise BadRequest(f"{label} is {len(value)} characters long; the limit is {MAX_SEARCH_TEXT}")
    if "\x00" in value:
        raise BadRequest(f"{label} contains a NUL character")
    return value.strip()


def arg_match(text: str) -> ArgMatch:
    """``name=value`` (the argument ``name``), or ``value`` (any top-level argument)."""
    name, sep, value = text.partition("=")
    if sep and name.strip().isidentifier():
        return ArgMatch(name.strip(), value.strip())
    return ArgMatch(None, text)


def cursor(params: Mapping[str, str], where: JobFilter, zone: tzinfo) -> Cursor | None:
    """Where the page starts: after ``before`` (and ``before_at``, by when jobs finished)."""
    before = positive_int(params.get("before"), "before")
    if before is None:
        return None
    at = moment(params.get("before_at"), "before_at", zone) if where.by_finish else None
    return Cursor(before, at)


def filter_params(params: Mapping[str, str]) -> dict[str, str]:
    """The filter's fields as they came, for links and forms that keep the filter."""
    return {name: params.get(name) or "" for name in FILTER_FIELDS}


async def jobs(request: Request) -> Response:
    """GET /jobs: a page of the jobs the query string's filter selects, newest first (by finish
    time for a time range), with the link to the next page; 400 naming a bad parameter."""
    s = settings(request)
    _, where = zone_of(request)
    try:
        chosen = job_filter(request.query_params, where=where, show_args=s.show_args)
        before = cursor(request.query_params, chosen, where)
    except BadRequest as exc:
        return bad_request(request, exc)
    async with reading(request) as conn:
        page = await Queries.job_page(
            conn, chosen, before=before, limit=PAGE_SIZE, scan=SEARCH_WINDOW if chosen.searches_text else None
        )
    kept = filter_params(request.query_params)
    return render(
        request,
        "jobs.html",
        result=page,
        older=older_link(kept, page),
        paged=before is not None,
        filters=kept,
        local_from=local_input(chosen.finished_from, where),
        local_to=local_input(chosen.finished_to, where),
        searching=chosen.searches_text,
        by_finish=chosen.by_finish,
        window=SEARCH_WINDOW,
        states=list(JobState),
        tasks=sorted(s.app.tasks),
        queues=s.app.queues(),
        notice=notice(request),
    )


def older_link(kept: Mapping[str, str], page: JobPage) -> dict[str, str] | None:
    """The next page's query parameters, or None on the last page."""
    if page.next is None:
        return None
    params = {**kept, "before": str(page.next.id)}
    if page.next.finished_at is not None:
        params["before_at"] = page.next.finished_at.astimezone(UTC).isoformat()
    return params


def local_input(value: datetime | None, where: tzinfo) -> str:
    """A datetime-local input's value in the page's zone."""
    return value.astimezone(where).strftime("%Y-%m-%dT%H:%M:%S") if value is not None else ""


def selected_ids(values: list[str]) -> tuple[int, ...]:
    """Job ids chosen in a listing (``id`` fields, or one ``ids`` field of commas)."""
    found: list[int] = []
    for value in values:
        for part in value.split(","):
            if part.strip():
                job_id = job_id_of(part)
                if job_id is None:
                    raise BadRequest(f"{part[:40]!r} is not a job id")
                found.append(job_id)
    return tuple(dict.fromkeys(found))
