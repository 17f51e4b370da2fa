"""Workflows under SIGKILL chaos (issue 29): fan-ins of 1,000 parents and 5-level diamond graphs
run by 3 worker processes of tests/apps/workflow_chaos.py that are SIGKILLed and started again,
while the harness fails, requeues and cancels random steps and whole workflows.

What each step does comes from its arguments (fail once, retry or snooze once, sleep, fan out a
new workflow inside ``complete_tx``), so the scenario knows every decision but the faults'. The
judgment is checker.py's for every job (nothing lost, no run repeated without a cause, every
``complete_tx`` effect once) and workflow_checker.py's for the workflows (released and run only
after the parents allow it, released once, every step ending where DESIGN §6 says, the results
of the parents). The CI sizes are in tests/faults/test_workflows_chaos.py; ``python -m
tests.faults.chaos --scenario workflows`` runs the long one.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from akadze import Akadze, request_cancel, requeue
from tests.apps.workflow_chaos import QUEUE, WF_DDL, build

from . import checker
from .ledger import install
from .scenarios import Env, fetch, registered, stop_fleet
from .supervisor import Supervisor, WorkerSpec
from .workflow_checker import STEPS_SQL, WF_AUDIT, Actions, StepPlan, WorkflowPlan, judge

APP = "tests.apps.workflow_chaos:create_app"


# -- the plans (pure: a seed makes the same graphs and the same misbehaving steps) -------------


def fan_in_plan(name: str, parents: int, rng: random.Random, *, failing_parent: bool = False) -> WorkflowPlan:
    """``parents`` short ``wf.ret`` steps, a ``wf.tx`` step ``join`` after all of them, and a
    ``report`` step after ``join`` that runs whatever its end (``after_failure="run"``). With
    ``failing_parent`` one parent fails once; the harness always requeues it."""
    names = [f"p{n:05d}" for n in range(parents)]
    failing = rng.randrange(parents) if failing_parent else -1
    steps = [
        StepPlan(p, "wf.ret", {"key": f"{name}:{p}", "ms": rng.randint(0, 20), "fail": n == failing})
        for n, p in enumerate(names)
    ]
    steps.append(StepPlan("join", "wf.tx", {"key": f"{name}:join"}, after=tuple(names)))
    report = StepPlan("report", "wf.ret", {"key": f"{name}:report"}, after=("join",), after_failure="run")
    steps.append(report)
    return WorkflowPlan(name, "fan-in", steps, fan_in="join", requeue_share=1.0)


#: what the first diamonds are made to do (the rest draw it): every kind in every run
FIRST_DRAWS = (0.1, 0.5, 0.6, 0.9)


def diamond_plan(
    name: str, rng: random.Random, *, width: int = 3, spawn: bool = False, draw: float | None = None
) -> WorkflowPlan:
    """Five levels: ``root``; ``a0..``, each after root; ``b{i}`` after ``a{i}`` and
    ``a{i+1}``; ``c{i}`` after ``b{i}`` and ``b{i+1}`` (``c0`` runs whatever its parents' end);
    ``sink`` after every ``c``. Some steps retry or snooze once; what else happens to the
    workflow is drawn: nothing, one or two steps that fail once, a cancel of a random unfinished
    step, or a cancel of the whole workflow (``draw`` picks it: below 0.35, 0.55, 0.62, or
    above); and, apart, a step of one attempt that runs about a
    second (a SIGKILL then fails it) and a step that expires 0.3-2 s after its enqueue. With
    ``spawn``, ``b1`` fans out a new workflow."""
    levels: list[list[tuple[str, tuple[str, ...]]]] = [[("root", ())]]
    levels.append([(f"a{i}", ("root",)) for i in range(width)])
    for prev, cur in (("a", "b"), ("b", "c")):
        levels.append([(f"{cur}{i}", (f"{prev}{i}", f"{prev}{(i + 1) % width}")) for i in range(width)])
    levels.append([("sink", tuple(f"c{i}" for i in range(width)))])
    draw = rng.random() if draw is None else draw
    plan = WorkflowPlan(name, "diamond", [])
    # a step of one attempt, long enough for a SIGKILL to meet it; a step that may expire first
    fragile = rng.choice(["a1", "b2", "c1"]) if rng.random() < 0.3 else None
    expiring = rng.choice(["b0", "c2", "sink"]) if rng.random() < 0.15 else None
    failing: set[str] = set()
    if draw < 0.35:
        failing = set(rng.sample([s for level in levels[1:] for s, _ in level], rng.randint(1, 2)))
    elif draw < 0.55:
        plan.cancel_step_at = rng.uniform(0.2, 3.0)
    elif draw < 0.62:
        plan.cancel_workflow_at = rng.uniform(0.2, 3.0)
    for level in levels:
        for step, after in level:
            key = f"{name}:{step}"
            if spawn and step == "b1":
                plan.steps.append(StepPlan(step, "wf.spawn", {"key": key, "width": 3, "ms": 20}, after))
                continue
            args = {
                "key": key,
                "ms": rng.randint(20, 250),
                "fail": step in failing,
                "retry": rng.random() < 0.1,
                "snooze": rng.random() < 0.1,
            }
            task = rng.choice(["wf.tx", "wf.ret"])
            if step == fragile:
                task, args["ms"] = "wf.fragile", rng.randint(800, 1500)
            expires = rng.uniform(0.3, 2.0) if step == expiring else None
            mode = "run" if step == "c0" else "cancel"
            plan.steps.append(StepPlan(step, task, args, after, mode, expires))
    return plan


# -- the harness's hands: enqueue, requeue, cancel --------------------------------------------


async def enqueue(app: Akadze, plan: WorkflowPlan, actions: Actions) -> None:
    from akadze import Workflow

    wf = Workflow(name=plan.name)
    now = datetime.now(UTC)
    for step in plan.steps:
        task = app.get_task(step.task)
        if step.expires_in is not None:
            call = task.using(expires_at=now + timedelta(seconds=step.expires_in)).bind(**step.args)
        else:
            call = task.bind(**step.args)
        wf.add(step.name, call, after=step.after, after_failure=step.after_failure)
    jobs = await wf.enqueue()
    actions.expiring |= {jobs[s.name].id for s in plan.steps if s.expires_in is not None}
    plan.ids = {name: job.id for name, job in jobs.items()}
    plan.workflow_id = next(iter(jobs.values())).workflow_id
    plan.enqueued_at = time.monotonic()


class Operator:
    """Requeues failed steps (a share per workflow, decided once per step, a moment after it
    failed) and makes each plan's cancels when they are due; ``quiet()`` once nothing is left to
    do and no step is queued or running."""

    def __init__(self, app: Akadze, dsn: str, plans: Sequence[WorkflowPlan], rng: random.Random) -> None:
        self.app = app
        self.dsn = dsn
        self.plans = list(plans)
        self.rng = rng
        self.actions = Actions()
        self.decided: set[int] = set()
        self.due: dict[int, float] = {}
        self.done: set[tuple[str, str]] = set()
        self.errors: list[str] = []

    def add(self, plan: WorkflowPlan) -> None:
        self.plans.append(plan)

    async def tick(self) -> bool:
        """One pass; whether anything is pending."""
        by_wf = {p.workflow_id: p for p in self.plans}
        now = time.monotonic()
        failed = await fetch(
            self.dsn,
            "SELECT id, workflow_id FROM akadze_jobs WHERE workflow_id IS NOT NULL AND state = 'failed'",
        )
        for row in failed:
            if row["id"] in self.decided:
                continue
            self.decided.add(row["id"])
            plan = by_wf.get(row["workflow_id"])
            if self.rng.random() < (plan.requeue_share if plan else 0.7):
                self.due[row["id"]] = now + self.rng.uniform(0.2, 1.5)
        for job_id, at in sorted(self.due.items()):
            if at <= now:
                del self.due[job_id]
                async with self.app.engine.begin() as conn:
                    moved = await requeue(conn, job_id, app=self.app)
                self.actions.requeues.append((job_id, moved is not None))
        pending = bool(self.due)
        for plan in self.plans:
            began = plan.enqueued_at
            for kind, offset in (("step", plan.cancel_step_at), ("workflow", plan.cancel_workflow_at)):
                if offset is None or began is None or (plan.name, kind) in self.done:
                    continue
                if now < began + offset:
                    pending = True
                    continue
                self.done.add((plan.name, kind))
                await self.cancel(plan, kind)
        return pending

    async def cancel(self, plan: WorkflowPlan, kind: str) -> None:
        if kind == "workflow":
            from akadze import cancel_workflow

            async with self.app.engine.begin() as conn:
                await cancel_workflow(conn, plan.workflow_id)
            assert plan.workflow_id is not None
            self.actions.workflow_cancels.append(plan.workflow_id)
            return
        rows = await fetch(
            self.dsn,
            "SELECT id FROM akadze_jobs WHERE workflow_id = $1 AND state IN ('queued', 'running') "
            "ORDER BY id",
            plan.workflow_id,
        )
        if not rows:
            return
        job_id = self.rng.choice(rows)["id"]
        async with self.app.engine.begin() as conn:
            changed = await request_cancel(conn, job_id, app=self.app)
        self.actions.cancels.append((job_id, changed))

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.tick()
            except Exception as exc:  # the harness's own error: reported, the loop goes on
                self.errors.append(f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(0.2)

    async def quiet(self, timeout: float) -> bool:
        """Until no step is queued or running and nothing is pending, twice in a row."""
        deadline = time.monotonic() + timeout
        calm = 0
        while time.monotonic() < deadline:
            pending = await self.tick()
            active = await fetch(
                self.dsn,
                "SELECT count(*) AS n FROM akadze_jobs WHERE workflow_id IS NOT NULL "
                "AND state IN ('queued', 'running')",
            )
            calm = calm + 1 if not pending and active[0]["n"] == 0 else 0
            if calm >= 2:
                return True
            await asyncio.sleep(0.3)
        return False


# -- the scenario -------------------------------------------------------------------------------


async def workflow_chaos(
    env: Env,
    *,
    fan_ins: Sequence[int] = (1000, 1000),
    diamonds: int = 24,
    seconds: float = 20.0,
    workers: int = 3,
    slots: int = 8,
    kill_every: tuple[float, float] = (2.0, 4.0),
    lost_after: float = 2.0,
    seed: int | None = None,
    drain_timeout: float = 240.0,
) -> checker.Figures:
    """Fan-ins (one of ``fan_ins[i]`` parents each; the second and later have a parent that fails
    once and is requeued) enqueued before the workers start, diamonds (every fourth with a step
    that fans out) enqueued over the first two thirds of ``seconds``, a random worker SIGKILLed
    every ``kill_every`` seconds for ``seconds`` and started again 0.3-1 s later."""
    seed = seed if seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    started = time.monotonic()
    await install(env.dsn, WF_DDL + WF_AUDIT)
    app, ledger = build(env.url, env.dsn)
    plans = [fan_in_plan(f"fan{i}", n, rng, failing_parent=i > 0) for i, n in enumerate(fan_ins)]
    later = [
        diamond_plan(f"dia{i}", rng, spawn=i % 4 == 1, draw=FIRST_DRAWS[i] if i < len(FIRST_DRAWS) else None)
        for i in range(diamonds)
    ]
    spec = WorkerSpec(env.url, env.dsn, slots=slots, lost_after=lost_after, queues=(QUEUE,), app=APP)
    fleet = Supervisor(spec, workers, env.folder / "logs", fault_dsn=env.dsn)
    fleet.seed(seed)
    fleet.restart_delay = (0.3, 1.0)
    operator = Operator(app, env.dsn, plans, rng)
    stop = asyncio.Event()
    try:
        for plan in plans:
            await enqueue(app, plan, operator.actions)
        fleet.start()
        await registered(env.dsn, workers)
        fleet.watch()
        hands = asyncio.create_task(operator.run(stop))

        async def produce() -> None:
            for plan in later:
                await asyncio.sleep(seconds * 0.66 / max(len(later), 1))
                await enqueue(app, plan, operator.actions)
                operator.add(plan)

        producing = asyncio.create_task(produce())
        load_started = time.monotonic()
        while time.monotonic() - load_started < seconds:
            await asyncio.sleep(rng.uniform(*kill_every))
            await fleet.kill(fleet.choice())
        await producing
        stop.set()
        await hands
        drained = await operator.quiet(drain_timeout)
        extra = await stop_fleet(fleet)
    finally:
        stop.set()
        await fleet.stop()
        await app.dispose()
        await ledger.close()
    plans = plans + later
    fig = await checker.check(
        env.dsn,
        "workflows under SIGKILL",
        effect_tasks=("wf.tx", "wf.spawn"),
        seconds=time.monotonic() - started,
        legal=checker.LEGAL | {checker.DEPENDENT_REQUEUE},
    )
    verdict = judge(
        plans=plans,
        workflows=await fetch(env.dsn, "SELECT id, name FROM akadze_workflows"),
        steps=await fetch(env.dsn, STEPS_SQL),
        edges=await fetch(env.dsn, "SELECT parent_id, child_id FROM akadze_job_deps"),
        events=await fetch(env.dsn, "SELECT * FROM chk_wf_transition ORDER BY id"),
        deps=[
            {**dict(r), "results": json.loads(r["results"]) if r["results"] is not None else None}
            for r in await fetch(env.dsn, "SELECT job_id, run, results FROM chk_wf_deps")
        ],
        execs=await fetch(env.dsn, "SELECT job_id, run, phase FROM chk_exec"),
        actions=operator.actions,
    )
    fig.extra = {
        "seed": seed,
        "kills": fleet.kills,
        "restarts": fleet.restarts,
        **verdict.figures,
        **extra,
    }
    fig.details["workflow notes"] = verdict.notes
    fig.details["operator errors"] = operator.errors
    fig.require(drained, "every step ended (none queued or running) within the drain timeout")
    for name, ids in verdict.counts().items():
        fig.require(False, f"workflow rule broken: {name} ({ids}; e.g. {verdict.notes[:3]})")
    fig.require(not operator.errors, f"the harness's requeues and cancels worked ({operator.errors[:3]})")
    fig.require(fleet.kills > 0, "at least one SIGKILL")
    fig.require(
        verdict.figures["runs whose dependency results were checked"] >= fig.succeeded,
        "every run's dependency_results() recorded and checked",
    )
    fans: list[dict[str, Any]] = verdict.figures["fan-ins"]
    fig.require(
        all(f["state"] == "succeeded" and f["releases"] == 1 and f["runs ended well"] == 1 for f in fans),
        "every fan-in step released once, run to its end once, succeeded",
    )
    fig.require(set(extra["graceful exits"].split("/")) == {"0"}, "every worker exits 0 on SIGTERM")
    return fig
