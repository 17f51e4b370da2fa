"""Judges workflows from what happened to their steps (DESIGN §6), beside checker.py's judgment
of every job: rows in, figures and violations out (unit-tested with made-up rows in
tests/faults/test_workflow_checker.py).

The rows come from the scenario's database: the steps as they ended, the edges
(``akadze_job_deps``), every change of a step's state, run, ``parked`` or ``deps_left`` (the
audit trigger of ``WF_AUDIT``, which records each change's transaction and orders all of them by
one sequence), what ``dependency_results()`` gave each run, and what the harness did (its
cancels, workflow cancels and requeues). The rules:

- a step is released (``parked = 'deps'`` cleared) and claimed only once every parent has
  succeeded (``after_failure="cancel"``) or finished (``"run"``), in an earlier transaction or
  in the releasing one; at release ``deps_left`` is 0 and never negative; one release per park;
- every step ends: a step of the "cancel" kind ends ``cancelled`` when a parent did not succeed,
  with ``DependencyFailed`` naming a parent unless the harness cancelled it; it is never
  cancelled when every parent succeeded unless the harness (or its own run, or its expiry)
  cancelled it, which
  catches a requeue that did not requeue the dependents its failure cancelled; a step of the
  "run" kind is never cancelled by a parent;
- every planned step and edge exists; a succeeded ``wf.spawn`` step made exactly one workflow,
  any other none;
- a run's ``dependency_results()`` holds every parent that had succeeded before the run's claim,
  with its result (``{"key": ...}`` from ``wf.ret``, ``None`` from ``wf.tx``), and no parent that
  never succeeded (docs: a step that did not succeed is absent).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

TERMINAL = frozenset({"succeeded", "failed", "cancelled"})

#: an audit of every change of a workflow step (after migration 0016), one sequence for all
WF_AUDIT = """
CREATE TABLE IF NOT EXISTS chk_wf_transition (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    old_state text,
    new_state text NOT NULL,
    old_run integer,
    new_run integer NOT NULL,
    old_parked text,
    new_parked text,
    old_deps integer,
    new_deps integer,
    error_type text,
    error_message text,
    xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS chk_wf_transition_job_idx ON chk_wf_transition (job_id);

CREATE OR REPLACE FUNCTION chk_wf_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO chk_wf_transition (job_id, new_state, new_run, new_parked, new_deps)
        VALUES (NEW.id, NEW.state, NEW.run, NEW.parked, NEW.deps_left);
    ELSIF NEW.state IS DISTINCT FROM OLD.state OR NEW.run IS DISTINCT FROM OLD.run
            OR NEW.parked IS DISTINCT FROM OLD.parked OR NEW.deps_left IS DISTINCT FROM OLD.deps_left THEN
        INSERT INTO chk_wf_transition (
            job_id, old_state, new_state, old_run, new_run, old_parked, new_parked, old_deps,
            new_deps, error_type, error_message
        )
        VALUES (
            NEW.id, OLD.state, NEW.state, OLD.run, NEW.run, OLD.parked, NEW.parked, OLD.deps_left,
            NEW.deps_left,
            CASE WHEN NEW.errors IS DISTINCT FROM OLD.errors THEN NEW.errors -> -1 ->> 'type' END,
            CASE WHEN NEW.errors IS DISTINCT FROM OLD.errors THEN NEW.errors -> -1 ->> 'message' END
        );
    END IF;
    RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS chk_wf_audit ON akadze_jobs;
CREATE TRIGGER chk_wf_audit AFTER INSERT OR UPDATE ON akadze_jobs
    FOR EACH ROW WHEN (NEW.workflow_id IS NOT NULL) EXECUTE FUNCTION chk_wf_audit();
"""

#: the steps as they ended (the last error's type and message)
STEPS_SQL = """
SELECT id, workflow_id, step, task, state, run, attempt, args ->> 'key' AS key,
       (args ->> 'width')::int AS width, after_failure, parked, deps_left,
       errors -> -1 ->> 'type' AS error_type, errors -> -1 ->> 'message' AS error_message
FROM akadze_jobs WHERE workflow_id IS NOT NULL
"""


@dataclass(frozen=True)
class StepPlan:
    """One step as the harness added it."""

    name: str
    task: str
    args: dict[str, Any]
    after: tuple[str, ...] = ()
    after_failure: str = "cancel"
    #: the step expires this many seconds after its enqueue (``using(expires_at=...)``)
    expires_in: float | None = None


@dataclass
class WorkflowPlan:
    """One workflow as the harness built it, and what the harness does to it."""

    name: str
    kind: str
    steps: list[StepPlan]
    #: the fan-in step whose runs are counted
    fan_in: str | None = None
    #: seconds after its enqueue when the harness cancels one unfinished step, or the workflow
    cancel_step_at: float | None = None
    cancel_workflow_at: float | None = None
    #: the share of its failed steps the harness requeues
    requeue_share: float = 0.7
    #: filled at enqueue: step name -> job id, and the workflow's id
    ids: dict[str, int] = field(default_factory=dict)
    workflow_id: int | None = None
    #: the harness's clock when it was enqueued (time.monotonic())
    enqueued_at: float | None = None


@dataclass
class Actions:
    """What the harness did: job ids it cancelled (and whether that changed anything), the
    workflows it cancelled, the failed steps it requeued (and whether they moved), the steps
    it gave an expiry."""

    cancels: list[tuple[int, bool]] = field(default_factory=list)
    expiring: set[int] = field(default_factory=set)
    workflow_cancels: list[int] = field(default_factory=list)
    requeues: list[tuple[int, bool]] = field(default_factory=list)


@dataclass
class Verdict:
    """The workflows' figures and violations (job ids per violation; each must be empty)."""

    figures: dict[str, Any] = field(default_factory=dict)
    violations: dict[str, list[int]] = field(default_factory=dict)
    #: a line per violation, for the investigation
    notes: list[str] = field(default_factory=list)

    def flag(self, name: str, job_id: int, note: str) -> None:
        self.violations.setdefault(name, []).append(job_id)
        if len(self.notes) < 40:
            self.notes.append(f"{name}: job {job_id}: {note}")

    def counts(self) -> dict[str, int]:
        return {name: len(ids) for name, ids in self.violations.items()}


def _allowed(parent_events: Sequence[Any], mode: str, before_id: int, xid: Any) -> bool:
    """Whether a parent had succeeded (mode cancel) or finished (mode run) before the event
    ``before_id`` of transaction ``xid``: in an earlier change or in the same transaction."""
    wanted = {"succeeded"} if mode == "cancel" else TERMINAL
    return any(
        e["new_state"] in wanted
        and e["old_state"] != e["new_state"]
        and (e["id"] < before_id or e["xid"] == xid)
        for e in parent_events
    )


def judge(
    *,
    plans: Sequence[WorkflowPlan],
    workflows: Sequence[Any],
    steps: Sequence[Any],
    edges: Sequence[Any],
    events: Sequence[Any],
    deps: Sequence[Any],
    execs: Sequence[Any],
    actions: Actions,
) -> Verdict:
    """Apply the rules of this module's docstring to the rows; ``events`` in id order."""
    v = Verdict()
    by_id = {s["id"]: s for s in steps}
    parents: dict[int, list[int]] = defaultdict(list)
    for edge in edges:
        parents[edge["child_id"]].append(edge["parent_id"])
    per_job: dict[int, list[Any]] = defaultdict(list)
    for e in events:
        per_job[e["job_id"]].append(e)
    cancelled_by_harness = {job_id for job_id, changed in actions.cancels if changed}
    cancelled_workflows = set(actions.workflow_cancels)

    _check_plans(v, plans, by_id, parents, workflows)
    releases = _check_events(v, by_id, parents, per_job)
    _check_ends(v, by_id, parents, cancelled_by_harness | actions.expiring, cancelled_workflows)
    _check_results(v, by_id, parents, deps, per_job)
    _check_spawns(v, steps, workflows)

    states: dict[str, int] = defaultdict(int)
    for s in steps:
        states[s["state"]] += 1
    dependency_failed = sum(1 for s in steps if "DependencyFailed" in (s["error_type"] or ""))
    requeued_dependents = sum(
        1 for e in events if e["old_state"] == "cancelled" and e["new_state"] == "queued"
    )
    v.figures.update(
        {
            "workflows": len(workflows),
            "steps": len(steps),
            "edges": len(edges),
            "steps succeeded/failed/cancelled": "/".join(
                str(states[s]) for s in ("succeeded", "failed", "cancelled")
            ),
            "steps whose last error is DependencyFailed": dependency_failed,
            "harness cancels (changed)": f"{len(actions.cancels)} ({len(cancelled_by_harness)})",
            "workflows cancelled": len(cancelled_workflows),
            "expiring steps (ended cancelled)": f"{len(actions.expiring)} "
            f"({sum(1 for j in actions.expiring if by_id.get(j, {}).get('state') == 'cancelled')})",
            "requeues (moved)": f"{len(actions.requeues)} ({sum(1 for _, ok in actions.requeues if ok)})",
            "dependents requeued with their parent": requeued_dependents,
            "releases": sum(releases.values()),
        }
    )
    v.figures["runs whose dependency results were checked"] = len(deps)
    v.figures["fan-ins"] = _fan_ins(plans, by_id, per_job, execs, releases)
    bad_workflows = {by_id[j]["workflow_id"] for ids in v.violations.values() for j in ids if j in by_id}
    v.figures["workflows ended as their rules say"] = len(workflows) - len(bad_workflows)
    return v


def _check_plans(
    v: Verdict,
    plans: Iterable[WorkflowPlan],
    by_id: dict[int, Any],
    parents: dict[int, list[int]],
    workflows: Sequence[Any],
) -> None:
    known = {w["id"] for w in workflows}
    for plan in plans:
        if plan.workflow_id not in known:
            v.flag("workflow lost", -1, f"{plan.name} (id {plan.workflow_id}) is not in akadze_workflows")
        for step in plan.steps:
            job_id = plan.ids.get(step.name)
            row = by_id.get(job_id) if job_id is not None else None
            if row is None or row["step"] != step.name or row["workflow_id"] != plan.workflow_id:
                v.flag("step lost", job_id or -1, f"{plan.name}/{step.name} missing or misplaced")
                continue
            if (row["after_failure"] or "cancel") != step.after_failure:
                got = row["after_failure"]
                v.flag("step changed", job_id, f"after_failure {got}, planned {step.after_failure}")
            want = {plan.ids[p] for p in step.after}
            if set(parents.get(job_id, ())) != want:
                got = parents.get(job_id)
                v.flag("edge lost", job_id, f"{plan.name}/{step.name}: parents {got}, planned {want}")


def _check_events(
    v: Verdict, by_id: dict[int, Any], parents: dict[int, list[int]], per_job: dict[int, list[Any]]
) -> dict[int, int]:
    """Releases and claims against the parents' changes; returns the releases per job."""
    releases: dict[int, int] = defaultdict(int)
    for job_id, events in per_job.items():
        row = by_id.get(job_id)
        if row is None:
            continue
        mode = row["after_failure"] or "cancel"
        parked = False
        for e in events:
            if e["new_deps"] is not None and e["new_deps"] < 0:
                v.flag("deps_left below 0", job_id, f"deps_left {e['new_deps']}")
            parks = e["new_parked"] == "deps" and e["new_state"] == "queued"
            if parks and not (e["old_parked"] == "deps" and e["old_state"] == "queued"):
                parked = True
            released = (
                e["old_parked"] == "deps"
                and e["old_state"] == "queued"
                and e["new_state"] == "queued"
                and e["new_parked"] != "deps"
            )
            claimed = e["old_state"] == "queued" and e["new_state"] == "running"
            if released:
                releases[job_id] += 1
                if not parked:
                    v.flag("released twice", job_id, f"release {e['id']} without a park before it")
                parked = False
                if e["new_deps"] not in (None, 0):
                    v.flag("released early", job_id, f"released with deps_left {e['new_deps']}")
            if claimed and parked:
                v.flag("ran early", job_id, f"claimed at change {e['id']} while parked")
            if released or claimed:
                for parent in parents.get(job_id, ()):
                    if not _allowed(per_job.get(parent, ()), mode, e["id"], e["xid"]):
                        kind = "released early" if released else "ran early"
                        v.flag(kind, job_id, f"change {e['id']}: parent {parent} had not ended as needed")
    return releases


def _check_ends(
    v: Verdict,
    by_id: dict[int, Any],
    parents: dict[int, list[int]],
    cancelled_by_harness: set[int],
    cancelled_workflows: set[int],
) -> None:
    for job_id, row in by_id.items():
        state = row["state"]
        if state not in TERMINAL:
            where = f"parked {row['parked']}, deps_left {row['deps_left']}"
            v.flag("stuck", job_id, f"{row['step']} still {state} ({where})")
            continue
        mode = row["after_failure"] or "cancel"
        ps = [by_id[p] for p in parents.get(job_id, ()) if p in by_id]
        harness = job_id in cancelled_by_harness or row["workflow_id"] in cancelled_workflows
        own = row["error_type"] == "akadze.Cancel"
        dependency = "DependencyFailed" in (row["error_type"] or "")
        not_ok = [p for p in ps if p["state"] != "succeeded"]
        if dependency and not any(p["step"] in (row["error_message"] or "") for p in ps):
            v.flag("wrong error", job_id, f"DependencyFailed names no parent: {row['error_message']!r}")
        if mode == "cancel" and not_ok:
            if state != "cancelled":
                v.flag("wrong end", job_id, f"{state} though parent {not_ok[0]['step']} {not_ok[0]['state']}")
            elif not (dependency or harness):
                v.flag("wrong error", job_id, f"cancelled without DependencyFailed ({row['error_type']})")
        elif state == "cancelled" and not (harness or own):
            why = "every parent succeeded" if mode == "cancel" else "after_failure='run'"
            v.flag("wrong end", job_id, f"{row['step']} cancelled ({row['error_type']}) though {why}")


def _check_results(
    v: Verdict,
    by_id: dict[int, Any],
    parents: dict[int, list[int]],
    deps: Sequence[Any],
    per_job: dict[int, list[Any]],
) -> None:
    """Each run's ``dependency_results()``: every parent that had succeeded before the run's
    claim, with its result; none that never succeeded (docs: a step that did not succeed is
    absent); no other step."""
    for rec in deps:
        job_id = rec["job_id"]
        if job_id not in by_id:
            continue
        results = rec["results"]
        claim = next(
            (
                e["id"]
                for e in per_job.get(job_id, ())
                if e["new_state"] == "running" and e["new_run"] == rec["run"]
            ),
            None,
        )
        ps = [by_id[p] for p in parents.get(job_id, ()) if p in by_id]
        before = {
            p["step"]
            for p in ps
            if claim is not None and _allowed(per_job.get(p["id"], ()), "cancel", claim, None)
        }
        never = {p["step"] for p in ps if p["state"] != "succeeded"}
        if not isinstance(results, dict):
            v.flag("wrong dependency results", job_id, f"run {rec['run']}: {type(results).__name__}")
            continue
        keys = set(results)
        if not before <= keys or keys & never or not keys <= {p["step"] for p in ps}:
            missing, extra = sorted(before - keys)[:3], sorted(keys & never)[:3]
            v.flag("wrong dependency results", job_id, f"run {rec['run']}: missing {missing}, extra {extra}")
            continue
        for p in ps:
            if p["step"] not in keys:
                continue
            want = {"key": p["key"]} if p["task"] in ("wf.ret", "wf.fragile") else None
            if results[p["step"]] != want:
                v.flag("wrong dependency results", job_id, f"{p['step']}: {results[p['step']]!r}")


def _check_spawns(v: Verdict, steps: Sequence[Any], workflows: Sequence[Any]) -> None:
    spawned: dict[str, list[int]] = defaultdict(list)
    for w in workflows:
        if (w["name"] or "").startswith("spawn:"):
            spawned[w["name"][len("spawn:") :]].append(w["id"])
    sizes: dict[int, int] = defaultdict(int)
    for s in steps:
        sizes[s["workflow_id"]] += 1
    for s in steps:
        if s["task"] != "wf.spawn":
            continue
        made = spawned.get(s["key"], [])
        if s["state"] == "succeeded":
            if len(made) != 1 or sizes[made[0]] != (s["width"] or 0) + 1:
                sized = [sizes[m] for m in made]
                v.flag("spawn lost or doubled", s["id"], f"{len(made)} workflows of {sized} steps")
        elif made:
            v.flag("spawn without success", s["id"], f"{s['state']} but made {len(made)} workflows")


def _fan_ins(
    plans: Sequence[WorkflowPlan],
    by_id: dict[int, Any],
    per_job: dict[int, list[Any]],
    execs: Sequence[Any],
    releases: dict[int, int],
) -> list[dict[str, Any]]:
    """Per planned fan-in step: its end, releases, claims, runs that ended well, and the time from
    its last parent's success to its release (database clock)."""
    ok_ends: dict[int, int] = defaultdict(int)
    for row in execs:
        if row["phase"] == "end_ok":
            ok_ends[row["job_id"]] += 1
    out = []
    for plan in plans:
        if plan.fan_in is None or plan.fan_in not in plan.ids:
            continue
        job_id = plan.ids[plan.fan_in]
        row = by_id.get(job_id)
        events = per_job.get(job_id, [])
        claims = sum(1 for e in events if e["old_state"] == "queued" and e["new_state"] == "running")
        step = next(s for s in plan.steps if s.name == plan.fan_in)
        successes = [
            e["at"]
            for p in step.after
            for e in per_job.get(plan.ids.get(p, -1), [])
            if e["new_state"] == "succeeded" and e["old_state"] != "succeeded"
        ]
        release = [
            e["at"]
            for e in events
            if e["old_parked"] == "deps" and e["new_parked"] != "deps" and e["new_state"] == "queued"
        ]
        delay = (release[-1] - max(successes)).total_seconds() if release and successes else None
        out.append(
            {
                "workflow": plan.name,
                "parents": len(step.after),
                "state": row["state"] if row else None,
                "releases": releases.get(job_id, 0),
                "claims": claims,
                "runs ended well": ok_ends.get(job_id, 0),
                "release after last parent s": delay,
            }
        )
    return out
