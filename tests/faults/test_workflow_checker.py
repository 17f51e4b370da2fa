"""The workflow judge itself: made-up rows of a small fan-in (A and B, then C), clean and with one
broken rule each, must come out clean and caught."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from .workflow_checker import Actions, StepPlan, Verdict, WorkflowPlan, judge

T0 = datetime(2026, 1, 1, tzinfo=UTC)
IDS = {"A": 1, "B": 2, "C": 3}


def step(
    name: str, state: str = "succeeded", *, task: str = "wf.ret", mode: str = "cancel", **kw: Any
) -> dict:
    return {
        "id": IDS[name],
        "workflow_id": 7,
        "step": name,
        "task": task,
        "state": state,
        "run": 1,
        "attempt": 1,
        "key": f"w:{name}",
        "width": None,
        "after_failure": mode,
        "parked": None,
        "deps_left": 0,
        "error_type": None,
        "error_message": None,
        **kw,
    }


class Events:
    """Changes in id order, each in a transaction of its own unless ``xid`` is given."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(
        self,
        name: str,
        old: str | None,
        new: str,
        *,
        old_parked: str | None = None,
        new_parked: str | None = None,
        deps: int | None = 0,
        xid: int | None = None,
        run: int = 0,
    ) -> Events:
        n = len(self.rows) + 1
        self.rows.append(
            {
                "id": n,
                "job_id": IDS[name],
                "old_state": old,
                "new_state": new,
                "old_run": run,
                "new_run": run + (1 if new == "running" else 0),
                "old_parked": old_parked,
                "new_parked": new_parked,
                "old_deps": None,
                "new_deps": deps,
                "xid": xid if xid is not None else 1000 + n,
                "at": T0 + timedelta(seconds=n),
            }
        )
        return self


def clean_events() -> Events:
    ev = Events()
    ev.add("A", None, "queued").add("B", None, "queued")
    ev.add("C", None, "queued", new_parked="deps", deps=2)
    ev.add("A", "queued", "running").add("B", "queued", "running")
    ev.add("A", "running", "succeeded", xid=50)
    ev.add("C", "queued", "queued", old_parked="deps", new_parked="deps", deps=1, xid=50)
    ev.add("B", "running", "succeeded", xid=60)
    ev.add("C", "queued", "queued", old_parked="deps", new_parked=None, deps=0, xid=60)
    ev.add("C", "queued", "running")
    ev.add("C", "running", "succeeded", run=1)
    return ev


def plan(c_mode: str = "cancel") -> WorkflowPlan:
    p = WorkflowPlan(
        "w",
        "fan-in",
        [
            StepPlan("A", "wf.ret", {}),
            StepPlan("B", "wf.ret", {}),
            StepPlan("C", "wf.tx", {}, after=("A", "B"), after_failure=c_mode),
        ],
        fan_in="C",
    )
    p.ids, p.workflow_id = dict(IDS), 7
    return p


def verdict(
    steps: list[dict[str, Any]],
    ev: Events,
    *,
    deps: list[dict[str, Any]] | None = None,
    actions: Actions | None = None,
    workflows: list[dict[str, Any]] | None = None,
    edges: list[dict[str, int]] | None = None,
    c_mode: str = "cancel",
) -> Verdict:
    return judge(
        plans=[plan(c_mode)],
        workflows=workflows if workflows is not None else [{"id": 7, "name": "w"}],
        steps=steps,
        edges=edges
        if edges is not None
        else [{"parent_id": 1, "child_id": 3}, {"parent_id": 2, "child_id": 3}],
        events=ev.rows,
        deps=deps
        if deps is not None
        else [{"job_id": 3, "run": 1, "results": {"A": {"key": "w:A"}, "B": {"key": "w:B"}}}],
        execs=[{"job_id": 3, "run": 1, "phase": "end_ok"}],
        actions=actions or Actions(),
    )


def clean_steps() -> list[dict[str, Any]]:
    return [step("A"), step("B"), step("C", task="wf.tx")]


def test_a_clean_fan_in_has_no_violation_and_one_release() -> None:
    v = verdict(clean_steps(), clean_events())
    assert v.violations == {}, v.notes
    (fan,) = v.figures["fan-ins"]
    assert fan["releases"] == 1 and fan["claims"] == 1 and fan["runs ended well"] == 1
    assert fan["release after last parent s"] == 1.0
    assert v.figures["workflows ended as their rules say"] == 1


def test_a_parent_failed_requeued_and_succeeded_with_its_dependent_requeued_is_clean() -> None:
    ev = Events()
    ev.add("A", None, "queued").add("B", None, "queued")
    ev.add("C", None, "queued", new_parked="deps", deps=2)
    ev.add("A", "queued", "running").add("A", "running", "succeeded", xid=50)
    ev.add("C", "queued", "queued", old_parked="deps", new_parked="deps", deps=1, xid=50)
    ev.add("B", "queued", "running").add("B", "running", "failed", xid=60)
    ev.add("C", "queued", "cancelled", old_parked="deps", new_parked="deps", deps=1, xid=60)
    ev.add("B", "failed", "queued", xid=70)
    ev.add("C", "cancelled", "queued", old_parked="deps", new_parked="deps", deps=1, xid=70)
    ev.add("B", "queued", "running", run=1).add("B", "running", "succeeded", xid=80, run=2)
    ev.add("C", "queued", "queued", old_parked="deps", new_parked=None, deps=0, xid=80)
    ev.add("C", "queued", "running").add("C", "running", "succeeded", run=1)
    v = verdict(clean_steps(), ev, actions=Actions(requeues=[(2, True)]))
    assert v.violations == {}, v.notes
    assert v.figures["dependents requeued with their parent"] == 1


def caught(change: str) -> Verdict:
    steps, ev = clean_steps(), clean_events()
    deps: list[dict[str, Any]] | None = None
    workflows = edges = None
    if change == "released before its last parent":
        ev.rows[8]["xid"] = 59  # the release in a transaction before B's success
        ev.rows[8]["id"], ev.rows[7]["id"] = ev.rows[7]["id"], ev.rows[8]["id"]
        ev.rows.sort(key=lambda r: r["id"])
    elif change == "released twice":
        ev.rows.insert(9, {**ev.rows[8], "id": 9.5})
    elif change == "claimed while parked":
        ev.rows[6]["new_parked"] = "deps"  # no release at all
        ev.rows[8]["new_parked"] = "deps"
    elif change == "deps_left below 0":
        ev.rows[8]["new_deps"] = -1
    elif change == "stuck":
        steps[2] = step("C", "queued", task="wf.tx", parked="deps", deps_left=1)
    elif change == "ran though a parent failed":
        steps[1] = step("B", "failed")
    elif change == "cancelled though every parent succeeded":
        steps[2] = step(
            "C", "cancelled", task="wf.tx", error_type="akadze.DependencyFailed", error_message="B"
        )
    elif change == "run-mode step cancelled by a parent":
        steps[1] = step("B", "cancelled")
        steps[2] = step("C", "cancelled", task="wf.tx", mode="run", error_type="akadze.DependencyFailed")
    elif change == "DependencyFailed naming no parent":
        steps[1] = step("B", "failed")
        steps[2] = step(
            "C", "cancelled", task="wf.tx", error_type="akadze.DependencyFailed", error_message="X"
        )
        ev.rows = ev.rows[:7]
    elif change == "a parent's result missing":
        deps = [{"job_id": 3, "run": 1, "results": {"A": {"key": "w:A"}}}]
    elif change == "a parent's result wrong":
        deps = [{"job_id": 3, "run": 1, "results": {"A": {"key": "w:A"}, "B": None}}]
    elif change == "a step lost":
        steps = steps[1:]
    elif change == "an edge lost":
        edges = [{"parent_id": 1, "child_id": 3}]
    elif change == "a workflow lost":
        workflows = []
    return verdict(steps, ev, deps=deps, workflows=workflows, edges=edges)


@pytest.mark.parametrize(
    ("change", "violation"),
    [
        ("released before its last parent", "released early"),
        ("released twice", "released twice"),
        ("claimed while parked", "ran early"),
        ("deps_left below 0", "deps_left below 0"),
        ("stuck", "stuck"),
        ("ran though a parent failed", "wrong end"),
        ("cancelled though every parent succeeded", "wrong end"),
        ("run-mode step cancelled by a parent", "wrong end"),
        ("DependencyFailed naming no parent", "wrong error"),
        ("a parent's result missing", "wrong dependency results"),
        ("a parent's result wrong", "wrong dependency results"),
        ("a step lost", "step lost"),
        ("an edge lost", "edge lost"),
        ("a workflow lost", "workflow lost"),
    ],
)
def test_each_broken_rule_is_caught(change: str, violation: str) -> None:
    v = caught(change)
    assert violation in v.violations, (v.violations, v.notes)


def test_a_step_the_harness_cancelled_may_end_cancelled() -> None:
    steps = clean_steps()
    steps[2] = step("C", "cancelled", task="wf.tx")
    ev = clean_events()
    ev.rows = ev.rows[:8]
    assert "wrong end" in verdict(steps, ev).violations
    assert verdict(steps, ev, actions=Actions(cancels=[(3, True)])).violations == {}


def test_a_spawn_step_makes_one_workflow_when_it_succeeds_and_none_otherwise() -> None:
    steps = clean_steps()
    steps[0] = step("A", task="wf.spawn", width=1)
    workflows = [{"id": 7, "name": "w"}, {"id": 8, "name": "spawn:w:A"}]
    spawned = [
        {**step("A"), "id": 10, "workflow_id": 8, "step": "s0", "key": "w:A>s0"},
        {**step("A"), "id": 11, "workflow_id": 8, "step": "join", "key": "w:A>join", "task": "wf.tx"},
    ]
    edges = [
        {"parent_id": 1, "child_id": 3},
        {"parent_id": 2, "child_id": 3},
        {"parent_id": 10, "child_id": 11},
    ]
    deps = [{"job_id": 3, "run": 1, "results": {"A": None, "B": {"key": "w:B"}}}]
    clean = verdict(steps + spawned, clean_events(), deps=deps, workflows=workflows, edges=edges)
    assert clean.violations == {}, clean.notes
    assert "spawn lost or doubled" in verdict(steps, clean_events()).violations
    doubled = [*workflows, {"id": 9, "name": "spawn:w:A"}]
    assert (
        "spawn lost or doubled"
        in verdict(steps + spawned, clean_events(), workflows=doubled, edges=edges).violations
    )


def test_a_run_mode_step_reads_its_succeeded_parents_only() -> None:
    steps = [step("A"), step("B", "failed"), step("C", task="wf.tx", mode="run")]
    ev = clean_events()
    ev.rows[7]["new_state"] = "failed"  # B failed; C (run) released all the same
    without_b = [{"job_id": 3, "run": 1, "results": {"A": {"key": "w:A"}}}]
    v = verdict(steps, ev, deps=without_b, c_mode="run")
    assert v.violations == {}, v.notes
    with_b = [{"job_id": 3, "run": 1, "results": {"A": {"key": "w:A"}, "B": None}}]
    assert "wrong dependency results" in verdict(steps, ev, deps=with_b, c_mode="run").violations


def test_an_expired_step_may_end_cancelled() -> None:
    steps = clean_steps()
    steps[2] = step("C", "cancelled", task="wf.tx")
    ev = clean_events()
    ev.rows = ev.rows[:9]
    assert "wrong end" in verdict(steps, ev).violations
    assert verdict(steps, ev, actions=Actions(expiring={3})).violations == {}
