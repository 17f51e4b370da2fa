"""Why a job is where it is, in plain words (``akadze jobs explain ID``).

Pure: :func:`explain` takes the job's row, the database's clock and what the live workers
published, and returns the reasons; the CLI reads those rows (akadze/cli/jobs.py) and prints
them. No IO, no clock reads here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import msgspec

from akadze.db.graph import Waits
from akadze.db.queries import LiveTask
from akadze.db.stats import LiveWorker
from akadze.flow import Limit
from akadze.job import Job, JobRef, JobState


class Hold(msgspec.Struct, frozen=True):
    """A limit that holds the job back (its task's Limit): which limit and the jobs that fill it."""

    #: the limit in words, say "concurrency 2 per account_id"
    limit: str
    #: the running (or recently started) jobs that fill it
    blocking_ids: tuple[int, ...] = ()


def hold_of(
    limit: Limit, holders: Sequence[tuple[str, int, datetime | None]], *, now: datetime
) -> Hold | None:
    """Whether ``limit`` is full for the job, from the jobs that fill its group
    (Queries.limit_holders: kind 'c' running, 'r' started in the rate window, the job, free_at).
    Never names the key's value (an argument): only the key's name."""
    per = f" per {limit.key}" if limit.key else ""
    running = [job_id for kind, job_id, _ in holders if kind == "c"]
    if limit.concurrency is not None and len(running) >= limit.concurrency:
        return Hold(f"concurrency {limit.concurrency}{per}, all taken", tuple(running))
    started = [(job_id, free_at) for kind, job_id, free_at in holders if kind == "r" and free_at]
    if limit.rate is not None and limit.per is not None and len(started) >= limit.rate:
        until = min(free_at for _, free_at in started)
        return Hold(
            f"rate {limit.rate} per {_span(limit.per)}{per}, reached: the next start is free at "
            f"{_at(until)} (in {_span(until - now)})",
            tuple(job_id for job_id, _ in started),
        )
    return None


class Reason(msgspec.Struct, frozen=True):
    """One reason: a stable ``code`` for scripts and a sentence for people."""

    code: str
    message: str


class Explanation(JobRef, frozen=True):
    """What ``jobs explain`` prints (and its ``--output json`` document): the job, then why."""

    #: the first reason is the main one; a ready job nothing holds back has one reason, "ready"
    reasons: tuple[Reason, ...]


def explain(
    job: Job,
    *,
    now: datetime,
    paused_at: datetime | None,
    live: Sequence[LiveTask],
    workers: Sequence[LiveWorker],
    hold: Hold | None = None,
    parked: str | None = None,
    limits_known: bool = True,
    waits: Waits | None = None,
) -> Explanation:
    """The reasons ``job`` is in its state at ``now`` (the database's clock).

    Args:
        job: the job's row.
        now: the database's clock when the rows were read.
        paused_at: when the job's queue was paused; None when it is not paused.
        live: what every live worker published (live_task_schemas: one row per task, or one
            row with ``task`` None for a worker that published none).
        workers: the live workers (live_workers), to name the one running the job.
        hold: the job's limit, when it holds the job back (issue 14).
        parked: the job's ``parked`` column: ``'limit'`` when a claim found its limit's group
            full and set it aside (docs/flow-control.md); visible without the app.
        limits_known: whether the task's Limit is known here (the app was given and declares
            the task). Without it, a job not parked may still be held by a limit a claim has
            not met yet: the reasons say so rather than call it ready outright.
        waits: the steps the job waits for, when it is a workflow's step parked for its
            parents (issue 29): then that is the main reason.
    """
    if job.state is JobState.QUEUED:
        reasons = _queued(job, now, paused_at, live, hold, parked, limits_known)
        if waits is not None:
            reasons = [_waiting(waits), *(r for r in reasons if r.code != "ready")]
    elif job.state is JobState.RUNNING:
        reasons = _running(job, now, workers)
    else:
        reasons = _finished(job)
    return Explanation(job.id, job.task, job.queue, job.state, tuple(reasons))


def _queued(
    job: Job,
    now: datetime,
    paused_at: datetime | None,
    live: Sequence[LiveTask],
    hold: Hold | None,
    parked: str | None,
    limits_known: bool,
) -> list[Reason]:
    reasons: list[Reason] = []
    if job.cancel_requested:
        reasons.append(
            Reason("cancel_requested", "a cancel was requested: it ends cancelled at its next claim")
        )
    if job.expires_at is not None and job.expires_at <= now:
        reasons.append(
            Reason("expired", f"it expired at {_at(job.expires_at)}: it ends cancelled at its next claim")
        )
    if job.run_at > now:
        why = _delayed_why(job)
        reasons.append(
            Reason("delayed", f"delayed until {_at(job.run_at)} (in {_span(job.run_at - now)}){why}")
        )
    if paused_at is not None:
        reasons.append(
            Reason(
                "queue_paused",
                f"its queue {job.queue!r} is paused (since {_at(paused_at)}): no worker takes its jobs "
                f"until `akadze queues resume {job.queue}`",
            )
        )
    serving = _serving(live, job.queue)
    if not serving:
        reasons.append(
            Reason(
                "no_live_worker",
                f"no live worker serves queue {job.queue!r}: start one (akadze worker APP -q {job.queue})",
            )
        )
    else:
        known = [row for row in serving if row.task == job.task]
        published = any(row.task is not None for row in serving)
        if not known and published:
            names = ", ".join(sorted({row.worker_name for row in serving}))
            reasons.append(
                Reason(
                    "unknown_task",
                    f"task {job.task!r} is unknown to every live worker serving queue {job.queue!r} "
                    f"({names}): a claim would fail the run with UnknownTaskError",
                )
            )
        elif known and job.args_fp is not None and all(row.args_fp != job.args_fp for row in known):
            reasons.append(
                Reason(
                    "schema_differs",
                    f"its arguments were built against schema {job.args_fp}, and the live workers run "
                    f"{', '.join(sorted({row.args_fp or '-' for row in known}))}: it may fail as "
                    "ArgsSchemaMismatch (see `akadze codegen verify`)",
                )
            )
    if hold is not None:
        blocking = ", ".join(str(i) for i in hold.blocking_ids) or "none listed"
        reasons.append(
            Reason("held_by_limit", f"held by its limit ({hold.limit}); jobs filling it: {blocking}")
        )
    elif parked == "limit":
        reasons.append(Reason("held_by_limit", _parked(limits_known)))
    if not reasons:
        waited = f"; waiting {_span(now - job.run_at)} so far" if job.run_at <= now else ""
        unless = (
            ""
            if limits_known
            else "; unless a Limit of its task holds it, which is not known without the app "
            "(pass --app to check)"
        )
        reasons.append(
            Reason(
                "ready",
                f"ready since {_at(job.run_at)}{waited}: a worker serving queue {job.queue!r} takes it "
                f"when it has a free slot (higher priorities and older jobs first){unless}",
            )
        )
    return reasons


def _parked(limits_known: bool) -> str:
    if limits_known:
        # the app's limit has room now (hold is None), or the task declares none any more
        return (
            "parked by its limit, which does not hold it now: a limited claim takes it when its "
            "group is next due (a task whose Limit was removed keeps its parked jobs: "
            "docs/flow-control.md)"
        )
    return (
        "held by its limit: parked (by its enqueue, or by a claim that found its group full); it "
        "starts when a limited claim finds room in its group (pass --app to name the limit and the "
        "jobs filling it)"
    )


#: ``jobs explain`` names at most this many of the steps a step waits for
WAITED_NAMED = 10


def _waiting(waits: Waits) -> Reason:
    """The steps a waiting step waits for, named (the first WAITED_NAMED), and what releases it."""
    named = ", ".join(f"{s.step!r} (job {s.id}, {s.state.value})" for s in waits.steps[:WAITED_NAMED])
    more = waits.unfinished - min(len(waits.steps), WAITED_NAMED)
    if more > 0:
        named += f" and {more:,} more"
    count = waits.unfinished
    steps = "1 step" if count == 1 else f"{count:,} steps"
    until = "they have succeeded"
    if waits.after_failure == "run":
        until = "they have finished, whatever their end"
    if count == 0:
        # its parents finished and its release has not committed yet, or a replica lags
        return Reason(
            "waiting_for_steps",
            f"waits for its parents in workflow {waits.workflow_id} ({waits.deps_left} still counted), "
            "none of which is unfinished: it is released by the completion that ends the last one",
        )
    return Reason(
        "waiting_for_steps",
        f"waits for {steps} of workflow {waits.workflow_id}: {named}; it is released once "
        f"{until} (see `akadze workflows show {waits.workflow_id}`)",
    )


def _delayed_why(job: Job) -> str:
    if job.attempt == 0:
        return ""
    last = _last_error(job)
    spent = f", {job.attempt} of {job.max_attempts} attempts spent"
    return spent if last is None else f"{spent}; last error: {last}"


def _serving(live: Sequence[LiveTask], queue: str) -> list[LiveTask]:
    return [row for row in live if queue in row.worker_queues]


def _running(job: Job, now: datetime, workers: Sequence[LiveWorker]) -> list[Reason]:
    since = f"since {_at(job.started_at)} ({_span(now - job.started_at)})" if job.started_at else ""
    attempt = f"attempt {job.attempt} of {job.max_attempts}"
    worker = next((w for w in workers if w.id == job.worker_id), None)
    reasons: list[Reason] = []
    if worker is not None:
        reasons.append(
            Reason(
                "running",
                f"running on worker {worker.name} ({worker.id}) {since}, {attempt}".replace("  ", " "),
            )
        )
    else:
        reasons.append(
            Reason(
                "worker_lost",
                f"running on worker {job.worker_id or '-'} {since}, {attempt}, but that worker is no longer "
                "live (no heartbeat): a live worker's rescue puts the job back".replace("  ", " "),
            )
        )
    if job.cancel_requested:
        reasons.append(
            Reason("cancel_requested", "a cancel was requested: it ends cancelled unless it succeeds first")
        )
    return reasons


def _finished(job: Job) -> list[Reason]:
    at = f" at {_at(job.finished_at)}" if job.finished_at else ""
    last = _last_error(job)
    if job.state is JobState.SUCCEEDED:
        runs = "1 attempt" if job.attempt == 1 else f"{job.attempt} attempts"
        return [Reason("succeeded", f"succeeded{at} after {runs}")]
    if job.state is JobState.FAILED:
        error = f"; last error: {last}" if last else ""
        return [
            Reason("failed", f"failed for good{at}, after attempt {job.attempt} of {job.max_attempts}{error}")
        ]
    error = f"; last error: {last}" if last else ""
    return [Reason("cancelled", f"cancelled{at}{error}")]


def _last_error(job: Job) -> str | None:
    if not job.errors:
        return None
    error = job.errors[-1]
    return f"{error.type}: {error.message}" if error.message else error.type


def _at(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def _span(delta: timedelta) -> str:
    """A duration for people: ``3s``, ``4m 10s``, ``2h 5m``, ``3d 4h``."""
    seconds = max(int(delta.total_seconds()), 0)
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    if minutes:
        return f"{minutes}m {secs}s"
    return f"{secs}s"
