"""What the job page shows besides the row: its timeline, from the job's own timestamps and
errors, and its arguments and result as JSON. Pure: no IO, no clock reads."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import msgspec

from akadze.job import Job, JobState


@dataclass(frozen=True, slots=True)
class Event:
    """One line of a job's timeline on its page: when, what, and how the page marks it."""

    at: datetime
    #: what happened, in a few words
    what: str
    #: more: an error's type and message (escaped when rendered, like everything else)
    detail: str = ""
    #: a CSS class: ok, error, wait, info
    kind: str = "info"


def timeline(job: Job) -> list[Event]:
    """Enqueued, each recorded error, the last start, the end, and a pending run_at, in time
    order. A job's row keeps only its last start; earlier attempts show as their errors."""
    events = [Event(job.created_at, "enqueued", f"queue {job.queue}, priority {job.priority}")]
    for error in job.errors:
        at = _parse(error.at)
        if at is not None:
            events.append(
                Event(at, f"attempt {error.attempt} failed", f"{error.type}: {error.message}", "error")
            )
    if job.started_at is not None:
        events.append(Event(job.started_at, f"attempt {job.attempt} started", kind="info"))
    if job.finished_at is not None:
        kind = "ok" if job.state is JobState.SUCCEEDED else "error"
        events.append(Event(job.finished_at, job.state.value, kind=kind))
    elif job.state is JobState.QUEUED and job.run_at > job.created_at:
        events.append(Event(job.run_at, "next attempt due" if job.attempt else "due", "its run_at", "wait"))
    if job.cancel_requested and job.finished_at is None:
        events.append(Event(events[-1].at, "cancel requested", kind="wait"))
    events.sort(key=lambda event: event.at)
    return events


def _parse(at: str | datetime) -> datetime | None:
    try:
        parsed = at if isinstance(at, datetime) else datetime.fromisoformat(at)
    except (TypeError, ValueError):
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def job_json(job: Job) -> tuple[str, str]:
    """The arguments and the result as indented JSON."""
    return _pretty(job.args), _pretty(job.result)


def _pretty(value: object) -> str:
    try:
        return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()
    except (TypeError, msgspec.EncodeError):
        return repr(value)
