"""Poison jobs end failed with a clear error after their budget; the workers keep serving."""

from __future__ import annotations

from typing import Any

import pytest

from .scenarios import Env, poison

LOST = "akadze.WorkerLost"


def _own_errors(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The job's errors, without the rescues it met because a poison job killed its worker."""
    return [error for error in row["errors"] if error["type"] != LOST]


@pytest.mark.timeout(240)
async def test_poison_jobs_end_failed_with_a_clear_error_and_the_rest_flows(fault_env: Env) -> None:
    fig = await poison(fault_env, normal=200)
    fig.assert_clean()
    jobs = fig.extra["poison"]
    assert len(jobs) == 7
    for key, row in jobs.items():
        assert row["state"] == "failed", row
        assert row["claims"] <= row["max_attempts"], row
        assert "SECRET" not in str(row["errors"]), "an argument value leaked into the stored error"
        if key != "poison-strict-2":
            assert row["attempt"] == row["max_attempts"], row
    for key in ("poison-exit-0", "poison-exit-1"):
        assert jobs[key]["max_attempts"] == 3 and not _own_errors(jobs[key]), jobs[key]
    for key, words in (
        ("poison-strict-0", ("invalid arguments for task 'fault.strict'", "n:")),
        ("poison-strict-1", ("invalid arguments for task 'fault.strict'", "unexpected")),
        ("poison-unknown", ("fault.gone",)),
        ("poison-system-exit", ("SystemExit",)),
    ):
        own = _own_errors(jobs[key])
        assert own, jobs[key]
        for error in own:
            assert all(word in f"{error['type']}: {error['message']}" for word in words), error
    # a job built against another schema fails at its first decode, without a retry
    own = _own_errors(jobs["poison-strict-2"])
    assert len(own) == 1 and "ArgsSchemaMismatch" in own[0]["type"], jobs["poison-strict-2"]
    # only os._exit ends a worker process (both may die in one process); SystemExit does not
    assert (
        1 <= fig.extra["worker restarts"] <= jobs["poison-exit-0"]["claims"] + jobs["poison-exit-1"]["claims"]
    )
    assert fig.extra["SystemExit left its worker serving"]
    assert fig.extra["normal succeeded"] == "200/200"
