"""row_to_job builds a Job from its fields in order (positionally, for speed): each column
lands on the field of its name, with JSON columns as text (the claim's form) and decoded."""

from __future__ import annotations

import gc
from datetime import UTC, datetime, timedelta
from typing import Any

import msgspec

from akadze.codec.stored import row_to_job
from akadze.db.sql import JOB_COLUMNS
from akadze.job import Job, JobError, JobState

_AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _row(**text: Any) -> dict[str, Any]:
    # a distinct value per column, so that a field swapped with another shows
    return {
        "id": 7,
        "task": "mail.send",
        "queue": "mail",
        "state": "running",
        "priority": 3,
        "attempt": 2,
        "max_attempts": 5,
        "run": 4,
        "run_at": _AT,
        "expires_at": _AT + timedelta(hours=1),
        "cancel_requested": True,
        "worker_id": "00000000-0000-0000-0000-000000000001",
        "args_fp": "4cc9b813434a088c",
        "created_at": _AT - timedelta(seconds=1),
        "started_at": _AT + timedelta(seconds=1),
        "finished_at": _AT + timedelta(seconds=2),
        "trace_context": "00-aa-bb-01",
        "workflow_id": 11,
        "step": "charge",
        **text,
    }


_ERROR = {"attempt": 1, "at": "2026-01-02T03:04:05Z", "type": "ValueError", "message": "no"}


def test_each_column_lands_on_its_field() -> None:
    row = _row(args='{"to": "a@b.c"}', errors=msgspec.json.encode([_ERROR]).decode(), result='{"ok": 1}')
    job = row_to_job(row, json_text=True)
    assert set(JOB_COLUMNS) <= set(Job.__struct_fields__)
    for name in JOB_COLUMNS:
        if name not in ("args", "errors", "result", "state"):
            assert getattr(job, name) == row[name], name
    assert job.state is JobState.RUNNING
    assert job.args == {"to": "a@b.c"}
    assert job.errors == (JobError(1, "2026-01-02T03:04:05Z", "ValueError", "no"),)
    assert job.result == {"ok": 1}
    assert job.duplicate is False


def test_decoded_columns_and_a_claimed_row_without_errors_or_result() -> None:
    decoded = row_to_job(_row(args={"to": "x"}, errors=[_ERROR], result=None))
    assert decoded.args == {"to": "x"} and len(decoded.errors) == 1 and decoded.result is None
    claimed = row_to_job(_row(args="{}", errors="[]", result=None), json_text=True)
    assert claimed.errors == () and claimed.result is None and claimed.args == {}
    row = _row(args="{}", errors="[]", result=None, worker_id=None)
    del row["trace_context"]
    bare = row_to_job(row, json_text=True)
    assert bare.worker_id is None and bare.trace_context is None


def test_jobs_and_their_errors_are_not_tracked_by_the_collector() -> None:
    # a batch enqueue returns a Job per row and a claim one per job: tracked, they brought full
    # collections sooner (akadze/job.py)
    job = row_to_job(
        _row(args='{"to": "a@b.c"}', errors=msgspec.json.encode([_ERROR]).decode(), result="{}"),
        json_text=True,
    )
    assert not gc.is_tracked(job)
    assert not gc.is_tracked(job.errors[0])
    assert not gc.is_tracked(msgspec.structs.replace(job, id=8))
