"""Tasks of the workflow fault scenario (tests/faults/workflow_chaos.py), for worker processes.

Worker subprocesses load it with ``akadze worker tests.apps.workflow_chaos:create_app``, which
reads ``AKADZE_FAULTS_URL`` (the engine's database) and ``AKADZE_FAULTS_LEDGER`` (a direct DSN
for the records), as tests/faults/app.py does. Two tasks, one body:

- ``wf.tx`` writes its effect in ``complete_tx`` (chk_effect: at most one per job, the checker
  counts a second) and returns nothing, so its dependents read ``None`` as its result;
- ``wf.ret`` writes no effect and returns ``{"key": key}``, which its dependents must read;
  ``wf.fragile`` is the same with one attempt, so a SIGKILL during its run fails it.

Every run records its start and end in ``chk_exec`` (tests/faults/ledger.py) and what
``current().dependency_results()`` gave it in ``chk_wf_deps``, both on connections of their
own (they survive the run's rollback, as an external effect would). A run fails (``Fail``) when
told to and it has not failed so before (so a requeue makes it succeed), raises ``Retry`` or
``Snooze`` on its first run when told to, and raises ``Cancel`` when a cancel was requested
while it slept (a cooperative task), so the harness's cancels end running steps too.

``wf.spawn`` (a ``wf.tx`` that fans out): inside its ``complete_tx`` it enqueues a workflow of
``spawn`` ``wf.ret`` steps and one ``wf.tx`` fan-in step, named ``spawn:<key>``, which commits
with its success or not at all.
"""

from __future__ import annotations

import asyncio
import json
import os
from datetime import timedelta
from typing import Any

from sqlalchemy import text

from akadze import Akadze, Cancel, Fail, Retry, Snooze, current
from tests.faults.ledger import Ledger

QUEUE = "wf"
#: the records this app writes beside the ledger's (the scenario creates them)
WF_DDL = """
CREATE TABLE IF NOT EXISTS chk_wf_deps (
    job_id bigint NOT NULL,
    run integer NOT NULL,
    results jsonb,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS chk_wf_deps_job_idx ON chk_wf_deps (job_id);
"""
_EFFECT = text(
    "INSERT INTO chk_effect (job_id, key, run) VALUES (:job_id, :key, :run) "
    "ON CONFLICT DO NOTHING RETURNING 1"
)
_DUPLICATE = text("INSERT INTO chk_dup_effect (job_id, key, run) VALUES (:job_id, :key, :run)")
#: the error message of a step told to fail (its first end only: a requeue then succeeds)
FAIL_MESSAGE = "told to fail"


def register_tasks(app: Akadze, ledger: Ledger) -> None:
    async def mark(phase: str, detail: str | None = None) -> None:
        job = current().job
        await ledger.mark(job.id, job.run, job.attempt, phase, detail)

    async def record_deps() -> None:
        ctx = current()
        results = await ctx.dependency_results()
        pool = await ledger._get()
        await pool.execute(
            "INSERT INTO chk_wf_deps (job_id, run, results) VALUES ($1, $2, $3::jsonb)",
            ctx.job.id,
            ctx.job.run,
            json.dumps(results),
        )

    async def misbehave(ms: int, fail: bool, retry: bool, snooze: bool) -> None:
        """What the step was told to do before it ends well."""
        ctx = current()
        job = ctx.job
        if ms:
            await asyncio.sleep(ms / 1000)
        if ctx.cancel_requested:
            raise Cancel("cancel requested while it ran")
        if retry and job.attempt == 1:
            raise Retry(timedelta(milliseconds=100), "told to retry")
        if snooze and job.run == 1:
            raise Snooze(timedelta(milliseconds=100))
        if fail and not any(error.message == FAIL_MESSAGE for error in job.errors):
            raise Fail(FAIL_MESSAGE)

    async def effect(key: str) -> None:
        job = current().job
        params = {"job_id": job.id, "key": key, "run": job.run}
        async with current().complete_tx() as conn:
            if (await conn.execute(_EFFECT, params)).first() is None:
                await conn.execute(_DUPLICATE, params)

    async def guarded(body: Any) -> Any:
        await mark("start")
        try:
            value = await body()
        except BaseException as exc:
            try:
                await asyncio.shield(mark("end_err", type(exc).__name__))
            except BaseException:  # noqa: S110 (best effort: the run's error is what matters)
                pass
            raise
        await mark("end_ok")
        return value

    async def tx(
        key: str, ms: int = 0, fail: bool = False, retry: bool = False, snooze: bool = False
    ) -> None:
        async def body() -> None:
            await record_deps()
            await misbehave(ms, fail, retry, snooze)
            await effect(key)

        await guarded(body)

    async def ret(
        key: str, ms: int = 0, fail: bool = False, retry: bool = False, snooze: bool = False
    ) -> dict[str, str]:
        async def body() -> dict[str, str]:
            await record_deps()
            await misbehave(ms, fail, retry, snooze)
            return {"key": key}

        result: dict[str, str] = await guarded(body)
        return result

    async def spawn(key: str, width: int, ms: int = 0) -> None:
        from akadze import Workflow

        async def body() -> None:
            await record_deps()
            await misbehave(ms, False, False, False)
            wf = Workflow(name=f"spawn:{key}")
            for n in range(width):
                wf.add(f"s{n}", ret_task.bind(key=f"{key}>s{n}", ms=ms))
            wf.add("join", tx_task.bind(key=f"{key}>join"), after=[f"s{n}" for n in range(width)])
            job = current().job
            params = {"job_id": job.id, "key": key, "run": job.run}
            async with current().complete_tx() as conn:
                if (await conn.execute(_EFFECT, params)).first() is None:
                    await conn.execute(_DUPLICATE, params)
                await wf.enqueue(session=conn)

        await guarded(body)

    timeout = timedelta(seconds=20)
    tx_task = app.register(tx, name="wf.tx", queue=QUEUE, max_attempts=10, timeout=timeout)
    ret_task = app.register(ret, name="wf.ret", queue=QUEUE, max_attempts=10, timeout=timeout)
    app.register(spawn, name="wf.spawn", queue=QUEUE, max_attempts=10, timeout=timeout)
    # one attempt: a SIGKILL during its run ends it failed (akadze.WorkerLost) at the rescue
    app.register(ret, name="wf.fragile", queue=QUEUE, max_attempts=1, timeout=timeout)


def build(database_url: str, ledger_dsn: str) -> tuple[Akadze, Ledger]:
    app = Akadze(database_url=database_url)
    ledger = Ledger(ledger_dsn)
    register_tasks(app, ledger)
    return app, ledger


def create_app() -> Akadze:
    app, _ledger = build(os.environ["AKADZE_FAULTS_URL"], os.environ["AKADZE_FAULTS_LEDGER"])
    return app
