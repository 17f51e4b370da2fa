"""The checker itself: made-up ledgers with one violation each must be caught, a clean one not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from .checker import DEPENDENT_REQUEUE, LEGAL, EnqueueRecord, Figures, classify, markdown_table

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def job(
    job_id: int, state: str = "succeeded", *, run: int = 1, attempt: int = 1, task: str = "fault.work"
) -> dict:
    return {
        "id": job_id,
        "task": task,
        "state": state,
        "attempt": attempt,
        "max_attempts": 3,
        "run": run,
        "key": f"k{job_id}",
    }


def t(
    job_id: int,
    old: str | None,
    new: str,
    old_run: int | None,
    new_run: int,
    *,
    error: str | None = None,
    s: float = 0,
):
    return {
        "job_id": job_id,
        "old_state": old,
        "new_state": new,
        "old_run": old_run,
        "new_run": new_run,
        "old_attempt": 0,
        "new_attempt": new_run,
        "max_attempts": 3,
        "error_type": error,
        "at": at(s),
    }


def e(job_id: int, run: int, phase: str, s: float, pid: int = 10) -> dict:
    return {"job_id": job_id, "run": run, "phase": phase, "pid": pid, "at": at(s)}


def happy(job_id: int) -> dict[str, list[Any]]:
    return {
        "jobs": [job(job_id)],
        "transitions": [
            t(job_id, None, "queued", None, 0),
            t(job_id, "queued", "running", 0, 1, s=1),
            t(job_id, "running", "succeeded", 1, 1, s=2),
        ],
        "execs": [e(job_id, 1, "start", 1), e(job_id, 1, "end_ok", 2)],
        "effects": [{"job_id": job_id, "run": 1}],
    }


def run(parts: dict[str, list[Any]], produced: list[EnqueueRecord] | None = None, faults=()) -> Figures:
    return classify(
        "unit",
        jobs=parts.get("jobs", []),
        execs=parts.get("execs", []),
        transitions=parts.get("transitions", []),
        effects=parts.get("effects", []),
        duplicates=parts.get("duplicates", []),
        faults=list(faults),
        produced=produced if produced is not None else [EnqueueRecord("k1", "ok", 1)],
        effect_tasks={"fault.work"},
    )


def test_a_clean_ledger_has_no_violation() -> None:
    fig = run(happy(1))
    assert fig.violations() == {} and fig.succeeded == 1 and fig.runs == 1


def test_a_rescued_rerun_is_justified_and_timed_from_the_kill() -> None:
    parts = happy(1)
    parts["jobs"] = [job(1, run=2, attempt=2)]
    parts["transitions"] = [
        t(1, None, "queued", None, 0),
        t(1, "queued", "running", 0, 1, s=1),
        t(1, "running", "queued", 1, 1, error="akadze.WorkerLost", s=5),
        t(1, "queued", "running", 1, 2, s=6),
        t(1, "running", "succeeded", 2, 2, s=7),
    ]
    parts["execs"] = [e(1, 1, "start", 1, pid=10), e(1, 2, "start", 6, pid=11), e(1, 2, "end_ok", 7, pid=11)]
    parts["effects"] = [{"job_id": 1, "run": 2}]
    fig = run(parts, faults=[{"kind": "kill", "target": "10", "at": at(2)}])
    assert fig.violations() == {}
    assert fig.reruns_rescue == 1 and fig.rescue_max_s == 3.0


@pytest.mark.parametrize(
    ("change", "violation"),
    [
        ("lost", "lost"),
        ("phantom", "phantom"),
        ("stuck", "stuck"),
        ("rerun_after_success", "reruns_unjustified"),
        ("same_run_twice", "reruns_unjustified"),
        ("duplicate_effect", "duplicate_effects"),
        ("two_ok_ends", "duplicate_effects"),
        ("success_without_effect", "effect_mismatch"),
        ("effect_of_a_losing_run", "effect_mismatch"),
        ("terminal_reopened", "illegal"),
        ("claim_skips_a_run", "illegal"),
        ("over_budget", "over_budget"),
        ("enqueued_twice", "duplicated_enqueues"),
    ],
)
def test_each_violation_is_caught(change: str, violation: str) -> None:
    parts = happy(1)
    produced = [EnqueueRecord("k1", "ok", 1)]
    if change == "lost":
        produced.append(EnqueueRecord("k2", "ok", 2))
    elif change == "phantom":
        parts["jobs"].append(job(2))
        produced.append(EnqueueRecord("k2", "failed"))
    elif change == "stuck":
        parts["jobs"] = [job(1, "running")]
        parts["effects"] = []
    elif change == "rerun_after_success":
        parts["execs"].append(e(1, 2, "start", 3))
    elif change == "same_run_twice":
        parts["execs"].append(e(1, 1, "start", 1.5))
    elif change == "duplicate_effect":
        parts["duplicates"] = [{"job_id": 1}]
    elif change == "two_ok_ends":
        parts["execs"].append(e(1, 1, "end_ok", 2.5))
    elif change == "success_without_effect":
        parts["effects"] = []
    elif change == "effect_of_a_losing_run":
        parts["effects"] = [{"job_id": 1, "run": 7}]
    elif change == "terminal_reopened":
        parts["transitions"].append(t(1, "succeeded", "queued", 1, 1, s=3))
    elif change == "claim_skips_a_run":
        parts["transitions"][1] = t(1, "queued", "running", 0, 2, s=1)
    elif change == "over_budget":
        parts["jobs"] = [job(1, attempt=4)]
    elif change == "enqueued_twice":
        parts["jobs"].append({**job(2), "key": "k1"})
    fig = run(parts, produced)
    assert violation in fig.violations(), fig.summary()


def test_unknown_enqueues_are_reported_as_recovered_not_as_violations() -> None:
    parts = happy(1)
    fig = run(parts, [EnqueueRecord("k1", "unknown"), EnqueueRecord("k9", "unknown")])
    assert fig.violations() == {} and fig.recovered == 1 and fig.enqueued_unknown == 2


def test_the_table_has_one_row_per_scenario_and_a_verdict() -> None:
    clean, broken = run(happy(1)), run({**happy(1), "duplicates": [{"job_id": 1}]})
    table = markdown_table([clean, broken]).splitlines()
    assert len(table) == 4
    assert table[2].endswith("PASS |") and "FAIL: duplicate_effects" in table[3]


def requeued(job_id: int) -> dict[str, list[Any]]:
    """A run that ended failed, a requeue, and a second run that succeeded."""
    parts = happy(job_id)
    parts["jobs"] = [job(job_id, run=2, attempt=2)]
    parts["transitions"] = [
        t(job_id, None, "queued", None, 0),
        t(job_id, "queued", "running", 0, 1, s=1),
        t(job_id, "running", "failed", 1, 1, error="akadze.Fail", s=2),
        t(job_id, "failed", "queued", 1, 1, s=3),
        t(job_id, "queued", "running", 1, 2, s=4),
        t(job_id, "running", "succeeded", 2, 2, s=5),
    ]
    parts["execs"] = [e(job_id, 1, "start", 1), e(job_id, 2, "start", 4), e(job_id, 2, "end_ok", 5)]
    parts["effects"] = [{"job_id": job_id, "run": 2}]
    return parts


def test_a_run_after_a_requeue_is_justified_and_counted_as_such() -> None:
    fig = run(requeued(1))
    assert fig.violations() == {} and fig.reruns_requeue == 1 and fig.reruns == 1


def test_a_run_after_a_failure_without_a_requeue_is_unjustified() -> None:
    parts = requeued(1)
    del parts["transitions"][3]
    fig = run(parts)
    assert fig.reruns_unjustified == 1 and fig.reruns_requeue == 0


def test_a_cancelled_step_requeued_is_legal_only_where_the_caller_allows_it() -> None:
    parts = happy(1)
    parts["jobs"] = [job(1, "cancelled")]
    parts["transitions"] = [
        t(1, None, "queued", None, 0),
        t(1, "queued", "cancelled", 0, 0, error="akadze.DependencyFailed", s=1),
        t(1, "cancelled", "queued", 0, 0, s=2),
        t(1, "queued", "cancelled", 0, 0, s=3),
    ]
    parts["execs"], parts["effects"] = [], []
    assert "illegal" in run(parts).violations()
    fig = classify(
        "unit",
        jobs=parts["jobs"],
        execs=[],
        transitions=parts["transitions"],
        effects=[],
        duplicates=[],
        faults=[],
        produced=[EnqueueRecord("k1", "ok", 1)],
        effect_tasks={"fault.work"},
        legal=LEGAL | {DEPENDENT_REQUEUE},
    )
    assert fig.violations() == {}


@pytest.mark.parametrize(
    ("rescued", "requeue", "not_rescued"),
    [
        # the rescue requeued the job; put back without it, the effect twice is a duplicate
        ("queued", [], None),
        # the rescue found no attempt left (the job failed) and a requeue ran it again; failed
        # by the run's own error instead, the effect twice is a duplicate
        ("failed", [("failed", "queued")], "akadze.Fail"),
    ],
)
def test_a_run_that_ended_well_and_was_rescued_before_its_outcome_ran_again_justly(
    rescued: str, requeue: list[tuple[str, str]], not_rescued: str | None
) -> None:
    parts = happy(1)
    parts["jobs"] = [job(1, run=2, attempt=2, task="fault.ret")]
    parts["transitions"] = [
        t(1, None, "queued", None, 0),
        t(1, "queued", "running", 0, 1, s=1),
        t(1, "running", rescued, 1, 1, error="akadze.WorkerLost", s=5),
        *(t(1, old, new, 1, 1, s=5.5) for old, new in requeue),
        t(1, "queued", "running", 1, 2, s=6),
        t(1, "running", "succeeded", 2, 2, s=7),
    ]
    parts["execs"] = [e(1, 1, "start", 1), e(1, 1, "end_ok", 2), e(1, 2, "start", 6), e(1, 2, "end_ok", 7)]
    parts["effects"] = []
    fig = run(parts)
    assert fig.violations() == {} and fig.ok_ends_rescued == 1
    assert fig.reruns_requeue == len(requeue)
    parts["transitions"][2] = t(1, "running", rescued, 1, 1, error=not_rescued, s=5)
    assert "duplicate_effects" in run(parts).violations()
