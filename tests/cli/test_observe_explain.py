"""akadze.control.explain.explain: the verdict of `jobs explain` from rows and a clock, without a database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from akadze.control.explain import Hold, explain
from akadze.db.queries import LiveTask
from akadze.db.stats import LiveWorker
from akadze.job import Job, JobError, JobState

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def job(**changes: Any) -> Job:
    base = Job(
        id=7,
        task="mail.send",
        queue="mail",
        state=JobState.QUEUED,
        priority=0,
        args={},
        attempt=0,
        max_attempts=3,
        run=0,
        run_at=NOW - timedelta(seconds=30),
        expires_at=None,
        cancel_requested=False,
        errors=(),
        result=None,
        worker_id=None,
        args_fp="fp1",
        created_at=NOW - timedelta(minutes=1),
        started_at=None,
        finished_at=None,
    )
    return msgspec.structs.replace(base, **changes)


SERVING = [LiveTask("w1", "worker-1", ("mail",), "mail.send", "mail", "fp1")]


def codes(found: Any) -> list[str]:
    return [r.code for r in found.reasons]


def test_a_ready_job_on_a_served_queue_is_just_ready() -> None:
    found = explain(job(), now=NOW, paused_at=None, live=SERVING, workers=[])
    assert codes(found) == ["ready"]
    assert "waiting 30s so far" in found.reasons[0].message


def test_a_retried_job_says_until_when_and_its_last_error() -> None:
    error = JobError(1, "2026-01-01T11:59:00Z", "ValueError", "bad input")
    found = explain(
        job(run_at=NOW + timedelta(minutes=4, seconds=10), attempt=1, errors=(error,)),
        now=NOW,
        paused_at=None,
        live=SERVING,
        workers=[],
    )
    assert codes(found) == ["delayed"]
    assert found.reasons[0].message == (
        "delayed until 2026-01-01T12:04:10+00:00 (in 4m 10s), 1 of 3 attempts spent; "
        "last error: ValueError: bad input"
    )


def test_every_blocker_is_named_together() -> None:
    found = explain(
        job(expires_at=NOW - timedelta(seconds=1), cancel_requested=True),
        now=NOW,
        paused_at=NOW - timedelta(hours=1),
        live=[],
        workers=[],
        hold=Hold("concurrency 1", (3, 4)),
    )
    assert codes(found) == ["cancel_requested", "expired", "queue_paused", "no_live_worker", "held_by_limit"]
    assert "jobs filling it: 3, 4" in found.reasons[-1].message


def test_unknown_task_and_another_schema() -> None:
    other = [LiveTask("w1", "worker-1", ("mail",), "other.task", "mail", "x")]
    assert codes(explain(job(), now=NOW, paused_at=None, live=other, workers=[])) == ["unknown_task"]
    # a worker that published no task (older akadze) may know it: not claimed unknown
    silent = [LiveTask("w1", "worker-1", ("mail",), None, None, None)]
    assert codes(explain(job(), now=NOW, paused_at=None, live=silent, workers=[])) == ["ready"]
    drifted = [LiveTask("w1", "worker-1", ("mail",), "mail.send", "mail", "fp2")]
    assert codes(explain(job(), now=NOW, paused_at=None, live=drifted, workers=[])) == ["schema_differs"]


def test_running_names_the_worker_and_since_when() -> None:
    worker = LiveWorker("w1", "worker-1", "h", 1, ("mail",), 4, NOW, NOW, 1.0, 1, (7,))
    running = job(
        state=JobState.RUNNING, attempt=1, worker_id="w1", started_at=NOW - timedelta(hours=2, minutes=5)
    )
    found = explain(running, now=NOW, paused_at=None, live=SERVING, workers=[worker])
    assert found.reasons[0].message == (
        "running on worker worker-1 (w1) since 2026-01-01T09:55:00+00:00 (2h 5m), attempt 1 of 3"
    )
    assert codes(explain(running, now=NOW, paused_at=None, live=SERVING, workers=[])) == ["worker_lost"]


def test_finished_jobs() -> None:
    error = JobError(3, "t", "akadze.Fail", "no such account")
    failed = job(state=JobState.FAILED, attempt=3, errors=(error,), finished_at=NOW)
    found = explain(failed, now=NOW, paused_at=None, live=[], workers=[])
    assert found.reasons[0].message == (
        "failed for good at 2026-01-01T12:00:00+00:00, after attempt 3 of 3; "
        "last error: akadze.Fail: no such account"
    )
    done = job(state=JobState.SUCCEEDED, attempt=2, finished_at=NOW)
    assert explain(done, now=NOW, paused_at=None, live=[], workers=[]).reasons[0].message == (
        "succeeded at 2026-01-01T12:00:00+00:00 after 2 attempts"
    )
    assert codes(explain(job(state=JobState.CANCELLED), now=NOW, paused_at=None, live=[], workers=[])) == [
        "cancelled"
    ]


def test_hold_of_a_limit_from_its_permits() -> None:
    from akadze.control.explain import hold_of
    from akadze.flow import Limit

    concurrency = Limit(concurrency=2)
    assert hold_of(concurrency, [("c", 3, None)], now=NOW) is None
    assert hold_of(concurrency, [("c", 3, None), ("c", 4, None)], now=NOW) == Hold(
        "concurrency 2, all taken", (3, 4)
    )
    rate = Limit(rate=2, per=timedelta(minutes=1), key="account")
    soon, later = NOW + timedelta(seconds=10), NOW + timedelta(seconds=50)
    assert hold_of(rate, [("r", 5, later)], now=NOW) is None
    held = hold_of(rate, [("r", 5, later), ("r", 6, soon)], now=NOW)
    assert held is not None and held.blocking_ids == (5, 6)
    assert held.limit == (
        "rate 2 per 1m 0s per account, reached: the next start is free at 2026-01-01T12:00:10+00:00 (in 10s)"
    )
