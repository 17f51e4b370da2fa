"""Judges a scenario from the ledger: every job is classified, every violation counted.

Violations (each must be 0): lost, phantom (a failed enqueue that exists), duplicated
enqueues, stuck (not terminal after the drain), unjustified re-runs (a run started again
though its previous run neither was rescued, nor failed with an error, nor was released, nor
ended failed and was requeued),
duplicate effects (a committed second effect, or two successful ends unless the first one's
outcome was lost with its worker and the job rescued), effect mismatches
(succeeded without its effect, an effect without success, an effect of a losing run), illegal
state changes and attempts over budget. Everything else is a figure to report.
"""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import asyncpg

#: (old state, new state, run step) of every allowed change; run step is new_run - old_run
LEGAL = {
    ("queued", "running", 1),  # claim
    ("queued", "cancelled", 1),  # claim of a job cancelled or expired before it started
    ("queued", "cancelled", 0),  # request_cancel
    ("running", "succeeded", 0),
    ("running", "failed", 0),
    ("running", "cancelled", 0),
    ("running", "queued", 0),  # retry, snooze, release at shutdown, rescue
    ("failed", "queued", 0),  # requeue
}
#: a workflow step cancelled because a step it waits for failed, requeued with that step
#: (DESIGN §6); the workflow scenario adds it to LEGAL
DEPENDENT_REQUEUE = ("cancelled", "queued", 0)

RESCUE_ERROR = "akadze.WorkerLost"


@dataclass
class EnqueueRecord:
    """One producer call, as the producer saw it."""

    key: str
    outcome: str  # "ok", "failed" or "unknown"
    job_id: int | None = None


@dataclass
class Figures:
    scenario: str
    jobs: int = 0
    enqueued_ok: int = 0
    enqueued_failed: int = 0
    enqueued_unknown: int = 0
    recovered: int = 0
    lost: int = 0
    phantom: int = 0
    duplicated_enqueues: int = 0
    stuck: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    runs: int = 0
    reruns_rescue: int = 0
    reruns_error: int = 0
    reruns_release: int = 0
    #: a run after the previous one ended failed and the job was requeued
    reruns_requeue: int = 0
    reruns_unjustified: int = 0
    #: runs that ended well but were rescued, their outcome not written, and ran again
    ok_ends_rescued: int = 0
    duplicate_effects: int = 0
    effect_mismatch: int = 0
    illegal: int = 0
    over_budget: int = 0
    overlaps: int = 0
    faults: int = 0
    rescue_p50_s: float | None = None
    rescue_max_s: float | None = None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    #: a few job ids per violation, to start the investigation from
    examples: dict[str, list[int]] = field(default_factory=dict)
    #: the scenario's own pass criteria that did not hold
    unmet: list[str] = field(default_factory=list)
    #: rows behind the figures, for tests and the JSON (not in the table)
    details: dict[str, Any] = field(default_factory=dict)

    VIOLATIONS = (
        "lost",
        "phantom",
        "duplicated_enqueues",
        "stuck",
        "reruns_unjustified",
        "duplicate_effects",
        "effect_mismatch",
        "illegal",
        "over_budget",
    )

    def violations(self) -> dict[str, int]:
        found = {name: getattr(self, name) for name in self.VIOLATIONS if getattr(self, name)}
        if self.unmet:
            found["unmet criteria"] = len(self.unmet)
        return found

    def require(self, condition: bool, criterion: str) -> None:
        """A pass criterion of the scenario beyond the checker's (it fails the verdict)."""
        if not condition:
            self.unmet.append(criterion)

    def assert_clean(self) -> None:
        found = self.violations()
        assert not found, (
            f"{self.scenario}: {found}; unmet {self.unmet}; examples {self.examples}; "
            f"figures {self.summary()}"
        )

    def summary(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("examples")
        data.pop("details")
        return data

    @property
    def reruns(self) -> int:
        return (
            self.reruns_rescue
            + self.reruns_error
            + self.reruns_release
            + self.reruns_requeue
            + self.reruns_unjustified
        )


TABLE_COLUMNS = (
    ("scenario", "scenario"),
    ("jobs", "jobs"),
    ("faults", "faults"),
    ("lost", "lost"),
    ("re-runs (rescue)", "reruns_rescue"),
    ("re-runs (error/release)", None),
    ("unjustified re-runs", "reruns_unjustified"),
    ("stuck", "stuck"),
    ("dup effects", "duplicate_effects"),
    ("illegal", "illegal"),
    ("time (s)", "seconds"),
    ("other figures", None),
    ("verdict", None),
)


def markdown_table(results: Sequence[Figures]) -> str:
    """One row per scenario, in the columns docs/reliability.md shows."""
    lines = [
        "| " + " | ".join(title for title, _ in TABLE_COLUMNS) + " |",
        "|" + "|".join("---" for _ in TABLE_COLUMNS) + "|",
    ]
    for fig in results:
        cells = []
        for title, attr in TABLE_COLUMNS:
            if attr == "seconds":
                cells.append(f"{fig.seconds:.0f}")
            elif attr is not None:
                cells.append(str(getattr(fig, attr)))
            elif title.startswith("re-runs (error"):
                cells.append(f"{fig.reruns_error}/{fig.reruns_release}")
            elif title == "other figures":
                cells.append(_other(fig))
            else:
                cells.append(
                    "PASS" if not fig.violations() else "FAIL: " + "; ".join([*fig.violations(), *fig.unmet])
                )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _other(fig: Figures) -> str:
    parts = [f"ok/failed/unknown enqueues {fig.enqueued_ok}/{fig.enqueued_failed}/{fig.enqueued_unknown}"]
    if fig.enqueued_unknown:
        parts.append(f"recovered {fig.recovered}")
    parts.append(f"succeeded/failed/cancelled {fig.succeeded}/{fig.failed}/{fig.cancelled}")
    if fig.ok_ends_rescued:
        parts.append(f"runs ended well, then rescued (outcome not written) {fig.ok_ends_rescued}")
    if fig.reruns_requeue:
        parts.append(f"re-runs after a requeue {fig.reruns_requeue}")
    if fig.rescue_max_s is not None:
        parts.append(f"rescue p50/max {fig.rescue_p50_s:.1f}/{fig.rescue_max_s:.1f} s")
    if fig.overlaps:
        parts.append(f"overlapping runs {fig.overlaps}")
    parts.extend(f"{name} {_fmt(value)}" for name, value in fig.extra.items() if value != [])
    return "; ".join(parts)


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


async def check(
    dsn: str,
    scenario: str,
    *,
    produced: Iterable[EnqueueRecord] = (),
    effect_tasks: Iterable[str] = ("fault.work", "fault.tick"),
    seconds: float = 0.0,
    all_logged: bool = True,
    records_dsn: str | None = None,
    legal: set[tuple[str, str, int]] | None = None,
) -> Figures:
    """Read the jobs and the ledger and classify every job.

    Args:
        produced: the producers' log; with ``all_logged`` every job row must come from it.
        effect_tasks: tasks whose success must come with exactly one effect of the winning run.
        records_dsn: where ``chk_exec`` and ``chk_fault`` are, when not beside the jobs.
        legal: the allowed changes, when not LEGAL.
    """
    conn = await asyncpg.connect(dsn)
    try:
        jobs = await conn.fetch(
            "SELECT id, task, state, attempt, max_attempts, run, args ->> 'key' AS key FROM akadze_jobs"
        )
        transitions = await conn.fetch("SELECT * FROM chk_transition ORDER BY id")
        effects = await conn.fetch("SELECT job_id, run FROM chk_effect")
        duplicates = await conn.fetch("SELECT job_id FROM chk_dup_effect")
    finally:
        await conn.close()
    conn = await asyncpg.connect(records_dsn or dsn)
    try:
        execs = await conn.fetch("SELECT job_id, run, phase, pid, at FROM chk_exec ORDER BY id")
        faults = await conn.fetch("SELECT kind, target, at FROM chk_fault ORDER BY id")
    finally:
        await conn.close()
    return classify(
        scenario,
        jobs=jobs,
        execs=execs,
        transitions=transitions,
        effects=effects,
        duplicates=duplicates,
        faults=faults,
        produced=list(produced),
        effect_tasks=set(effect_tasks),
        seconds=seconds,
        all_logged=all_logged,
        legal=legal,
    )


def classify(
    scenario: str,
    *,
    jobs: Sequence[Any],
    execs: Sequence[Any],
    transitions: Sequence[Any],
    effects: Sequence[Any],
    duplicates: Sequence[Any],
    faults: Sequence[Any],
    produced: Sequence[EnqueueRecord],
    effect_tasks: set[str],
    seconds: float = 0.0,
    all_logged: bool = True,
    legal: set[tuple[str, str, int]] | None = None,
) -> Figures:
    """The pure part of ``check``: rows in, figures out (unit-tested with made-up rows)."""
    fig = Figures(scenario, jobs=len(jobs), seconds=seconds)
    examples: dict[str, list[int]] = defaultdict(list)

    def flag(name: str, job_id: int, count: int = 1) -> None:
        setattr(fig, name, getattr(fig, name) + count)
        fig.details.setdefault(f"{name} ids", []).append(job_id)
        if len(examples[name]) < 5:
            examples[name].append(job_id)

    # -- enqueues (Jepsen's total-queue classes) ----------------------------------------------
    by_key: dict[str, list[int]] = defaultdict(list)
    for job in jobs:
        if job["key"] is not None:  # scheduled jobs have no producer key
            by_key[job["key"]].append(job["id"])
    logged: dict[str, str] = {}
    for record in produced:
        logged[record.key] = record.outcome
        if record.outcome == "ok":
            fig.enqueued_ok += 1
            if not by_key.get(record.key):
                fig.lost += 1
                fig.details.setdefault("lost keys", []).append(record.key)
        elif record.outcome == "failed":
            fig.enqueued_failed += 1
            if by_key.get(record.key):
                flag("phantom", by_key[record.key][0])
        else:
            fig.enqueued_unknown += 1
            if by_key.get(record.key):
                fig.recovered += 1
    for key, ids in by_key.items():
        if len(ids) > 1:
            flag("duplicated_enqueues", ids[0], len(ids) - 1)
        if all_logged and produced and key not in logged:
            flag("duplicated_enqueues", ids[0])

    # -- states --------------------------------------------------------------------------------
    job_by_id = {job["id"]: job for job in jobs}
    for job in jobs:
        state = job["state"]
        if state in ("queued", "running"):
            flag("stuck", job["id"])
        elif state == "succeeded":
            fig.succeeded += 1
        elif state == "failed":
            fig.failed += 1
        elif state == "cancelled":
            fig.cancelled += 1
        if job["attempt"] > job["max_attempts"]:
            flag("over_budget", job["id"])

    # -- transitions -----------------------------------------------------------------------------
    allowed = LEGAL if legal is None else legal
    ended_by: dict[tuple[int, int], Any] = {}
    #: (job, run) whose end (failed) was followed by a requeue
    requeued: set[tuple[int, int]] = set()
    for t in transitions:
        if t["old_state"] is None:
            if t["new_state"] != "queued":
                flag("illegal", t["job_id"])
            continue
        step = t["new_run"] - t["old_run"]
        if (t["old_state"], t["new_state"], step) not in allowed:
            flag("illegal", t["job_id"])
        if (t["old_state"], t["new_state"]) == ("failed", "queued"):
            requeued.add((t["job_id"], t["old_run"]))
        if t["new_attempt"] > t["max_attempts"] and t["new_state"] == "running":
            flag("over_budget", t["job_id"])
        if t["old_state"] == "running":
            ended_by[(t["job_id"], t["old_run"])] = t

    # -- runs ------------------------------------------------------------------------------------
    starts: dict[int, dict[int, list[Any]]] = defaultdict(lambda: defaultdict(list))
    ends: dict[tuple[int, int], list[Any]] = defaultdict(list)
    ok_ends: dict[int, list[int]] = defaultdict(list)
    for row in execs:
        if row["phase"] == "start":
            starts[row["job_id"]][row["run"]].append(row)
        else:
            ends[(row["job_id"], row["run"])].append(row)
            if row["phase"] == "end_ok":
                ok_ends[row["job_id"]].append(row["run"])
    for job_id, by_run in starts.items():
        runs = sorted(by_run)
        fig.runs += sum(len(rows) for rows in by_run.values())
        for run in runs:
            if len(by_run[run]) > 1:
                flag("reruns_unjustified", job_id, len(by_run[run]) - 1)
        for previous, following in itertools.pairwise(runs):
            reason = _end_reason(ended_by.get((job_id, previous)))
            if reason == "rescue":
                fig.reruns_rescue += 1
            elif reason == "error":
                fig.reruns_error += 1
            elif reason == "release":
                fig.reruns_release += 1
            elif reason == "failed" and (job_id, previous) in requeued:
                fig.reruns_requeue += 1
            else:
                flag("reruns_unjustified", job_id)
            next_start = min(row["at"] for row in by_run[following])
            if any(end["at"] > next_start for end in ends.get((job_id, previous), [])):
                fig.overlaps += 1

    # -- effects ---------------------------------------------------------------------------------
    for row in duplicates:
        flag("duplicate_effects", row["job_id"])
    for job_id, ok_runs in ok_ends.items():
        for previous, following in itertools.pairwise(sorted(ok_runs)):
            # a body that returned, whose worker was killed before the outcome was written: the
            # job was rescued and ran again (at-least-once; a complete_tx effect cannot be
            # written twice, since its commit is the success). The rescue may have failed the
            # job (no attempt left) and a requeue run it again: the runs above say whether that
            # rerun was justified
            if previous != following and _by_rescue(ended_by.get((job_id, previous))):
                fig.ok_ends_rescued += 1
            else:
                flag("duplicate_effects", job_id)
    effect_run = {row["job_id"]: row["run"] for row in effects}
    for job in jobs:
        if job["task"] not in effect_tasks:
            continue
        has_effect = job["id"] in effect_run
        if job["state"] == "succeeded" and (not has_effect or effect_run[job["id"]] != job["run"]):
            flag("effect_mismatch", job["id"])
        elif job["state"] != "succeeded" and has_effect:
            flag("effect_mismatch", job["id"])
    for job_id in effect_run:
        if job_id not in job_by_id:
            flag("effect_mismatch", job_id)

    # -- faults and rescue latency ------------------------------------------------------------
    fig.faults = len(faults)
    kills: dict[str, list[Any]] = defaultdict(list)
    for fault in faults:
        if fault["kind"] in ("kill", "stop"):
            kills[fault["target"]].append(fault["at"])
    latencies = []
    for (job_id, run), t in ended_by.items():
        if t["error_type"] != RESCUE_ERROR:
            continue
        rows = starts.get(job_id, {}).get(run)
        if not rows:
            continue
        before = [at for at in kills.get(str(rows[0]["pid"]), []) if at <= t["at"]]
        if before:
            latencies.append((t["at"] - max(before)).total_seconds())
    if latencies:
        fig.rescue_p50_s = statistics.median(latencies)
        fig.rescue_max_s = max(latencies)
    fig.examples = dict(examples)
    return fig


def _by_rescue(t: Any) -> bool:
    """Whether the rescuer ended the run ``t`` ended (requeued, or failed with no attempt left)."""
    return t is not None and t["error_type"] == RESCUE_ERROR


def _end_reason(t: Any) -> str:
    if t is not None and t["new_state"] == "failed":
        return "failed"
    if t is None or t["new_state"] != "queued":
        return "none"
    if t["error_type"] == RESCUE_ERROR:
        return "rescue"
    if t["error_type"] is not None:
        return "error"
    return "release"
