"""The trends the dashboard draws, as typed values: per slot of time, the jobs that finished per
final state and their run times' p50 and p95; per task and per queue, the same over a range.
Built from the rows of job_trend.sql; no IO here.

Run times come from a sparse histogram (akadze_job_stats.run_buckets and run_counts, migration
0014): bucket ``b`` holds the runs of ``2^(b/PER_DOUBLING)`` to ``2^((b+1)/PER_DOUBLING)``
microseconds. Histograms add bucket by bucket, so a percentile of any range and any set of
tasks is read from the sum; within a bucket the rank is placed geometrically, so a percentile is
within one bucket's width (19%) of the true one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

import msgspec

K = TypeVar("K")

#: buckets per doubling of the run time (the rollup's SQL takes it as :per_doubling)
PER_DOUBLING = 4
#: the last bucket, holding every longer run: 2^(147/4) µs is about 35 hours
TOP_BUCKET = 147
#: the final states a trend counts, in the order charts stack them
STATES = ("succeeded", "failed", "cancelled")


def bucket_of(microseconds: float) -> int:
    """The bucket of a run of ``microseconds`` (as the rollup computes it)."""
    return min(TOP_BUCKET, math.floor(PER_DOUBLING * math.log2(max(1.0, microseconds))))


def percentile(histogram: Mapping[int, int], share: float) -> float | None:
    """The run time in seconds below which ``share`` (0 to 1) of the runs fall; None without runs."""
    total = sum(histogram.values())
    if total <= 0:
        return None
    rank = share * total
    seen = 0
    for bucket in sorted(histogram):
        count = histogram[bucket]
        if count > 0 and seen + count >= rank:
            low = math.pow(2.0, bucket / PER_DOUBLING)
            placed = low * math.pow(2.0, (rank - seen) / count / PER_DOUBLING)
            return placed / 1e6
        seen += count
    return math.pow(2.0, (max(histogram) + 1) / PER_DOUBLING) / 1e6


class Outcomes(msgspec.Struct, frozen=True, kw_only=True):
    """How the jobs of a slot, a task or a queue ended, and their run times."""

    succeeded: int
    failed: int
    cancelled: int
    #: run time percentiles in seconds (succeeded and failed runs); None without runs
    p50: float | None
    p95: float | None

    @property
    def jobs(self) -> int:
        """Every job that ended: succeeded, failed and cancelled."""
        return self.succeeded + self.failed + self.cancelled

    @property
    def failed_share(self) -> float:
        """Failed jobs as a share of ``jobs``, from 0 to 1 (0 when none ended); the trends page shows
        it as a percentage."""
        return self.failed / self.jobs if self.jobs else 0.0

    @staticmethod
    def of(states: Mapping[str, int], histogram: Mapping[int, int]) -> dict[str, Any]:
        """The fields from counts per state and a run-time histogram."""
        return {
            **{state: states.get(state, 0) for state in STATES},
            "p50": percentile(histogram, 0.5),
            "p95": percentile(histogram, 0.95),
        }


class TrendSlot(Outcomes, frozen=True, kw_only=True):
    """One slot of a trend: from ``at`` for the trend's slot length."""

    at: datetime


class TrendTotal(Outcomes, frozen=True, kw_only=True):
    """A task's or a queue's figures over a trend's range."""

    name: str
    #: the queue of a task's row (a task may run in several: one row each); None for a queue
    queue: str | None


def _split(
    rows: Iterable[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], K]
) -> tuple[dict[K, dict[str, int]], dict[K, dict[int, int]]]:
    """job_trend.sql's rows by ``key``: the jobs per final state, and the run-time histogram."""
    jobs: dict[K, dict[str, int]] = {}
    runs: dict[K, dict[int, int]] = {}
    for row in rows:
        if row["bucket"] is None:
            jobs.setdefault(key(row), {})[row["state"]] = int(row["n"])
        else:
            runs.setdefault(key(row), {})[int(row["bucket"])] = int(row["n"])
    return jobs, runs


def trend_of(
    rows: Iterable[Mapping[str, Any]], since: datetime, slot: timedelta, count: int
) -> list[TrendSlot]:
    """The ``count`` slots from ``since`` (empty ones too), from job_trend.sql's rows by slot."""
    jobs, runs = _split(rows, lambda row: int(row["slot"]))
    slots = []
    for n in range(count):
        states, histogram = jobs.get(n, {}), runs.get(n, {})
        slots.append(TrendSlot(at=since + n * slot, **Outcomes.of(states, histogram)))
    return slots


def totals_of(rows: Iterable[Mapping[str, Any]]) -> tuple[list[TrendTotal], list[TrendTotal]]:
    """Per (task, queue) and per queue, from job_trend.sql's rows by queue and task; the busiest
    first."""
    jobs, runs = _split(rows, lambda row: (str(row["task"]), str(row["queue"])))
    tasks = [
        _total(task, queue, jobs.get((task, queue), {}), runs.get((task, queue), {})) for task, queue in jobs
    ]
    queue_jobs: dict[str, dict[str, int]] = {}
    queue_runs: dict[str, dict[int, int]] = {}
    for (_, queue), states in jobs.items():
        summed = queue_jobs.setdefault(queue, {})
        for state, n in states.items():
            summed[state] = summed.get(state, 0) + n
    for (_, queue), histogram in runs.items():
        summed_runs = queue_runs.setdefault(queue, {})
        for bucket, n in histogram.items():
            summed_runs[bucket] = summed_runs.get(bucket, 0) + n
    queues = [_total(queue, None, states, queue_runs.get(queue, {})) for queue, states in queue_jobs.items()]

    def busiest(total: TrendTotal) -> tuple[int, str]:
        return (-total.jobs, total.name)

    return sorted(tasks, key=busiest), sorted(queues, key=busiest)


def _total(
    name: str, queue: str | None, states: Mapping[str, int], histogram: Mapping[int, int]
) -> TrendTotal:
    return TrendTotal(name=name, queue=queue, **Outcomes.of(states, histogram))
