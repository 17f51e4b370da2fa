"""The application the fault scenarios run: tasks that write the ledger.

Worker subprocesses load it with ``akadze worker tests.faults.app:create_app``, which reads
``AKADZE_FAULTS_URL`` (the engine's database, possibly through a proxy or PgBouncer),
``AKADZE_FAULTS_LEDGER`` (a direct DSN for the ledger) and ``AKADZE_FAULTS_POOL``.
In-process tests call ``build()``.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
from datetime import datetime, timedelta
from typing import Any

from pydantic import BaseModel
from sqlalchemy import text

from akadze import Akadze, Cancel, Fail, Retry, Snooze, current

from .ledger import Ledger

QUEUE = "faults"
#: the retry herd's queue, and the fixed delay of its retries
HERD_QUEUE = "herd"
HERD_BACKOFF_S = 4.0


class Deepest(BaseModel):
    value: str


class Inner(BaseModel):
    deepest: Deepest
    more: list[str]


class Vault(BaseModel):
    inner: Inner
    note: dict[str, str]


_EFFECT = text(
    "INSERT INTO chk_effect (job_id, key, run) VALUES (:job_id, :key, :run) "
    "ON CONFLICT DO NOTHING RETURNING 1"
)
_READ = text("SELECT count(*) FROM akadze_jobs WHERE state = 'running'")
_DUPLICATE = text("INSERT INTO chk_dup_effect (job_id, key, run) VALUES (:job_id, :key, :run)")


async def write_effect(key: str) -> None:
    """The transactional effect: commits with the job's success or not at all."""
    ctx = current()
    job = ctx.job
    params = {"job_id": job.id, "key": key, "run": job.run}
    async with ctx.complete_tx() as conn:
        inserted = (await conn.execute(_EFFECT, params)).first()
        if inserted is None:
            await conn.execute(_DUPLICATE, params)


def register_tasks(app: Akadze, ledger: Ledger) -> None:
    async def mark(phase: str, detail: str | None = None) -> None:
        job = current().job
        await ledger.mark(job.id, job.run, job.attempt, phase, detail)

    async def work(
        key: str, ms: int = 0, first_ms: int | None = None, blob: str = "", read: bool = False
    ) -> None:
        """Start record, a sleep (``first_ms`` on the first run), a read on the app's pool
        (``read``), the effect, end record."""
        job = current().job
        await mark("start")
        pause = first_ms if first_ms is not None and job.run == 1 else ms
        try:
            if pause:
                await asyncio.sleep(pause / 1000)
            if read:
                async with app.engine.connect() as conn:
                    await conn.execute(_READ)
            await write_effect(key)
        except BaseException as exc:
            try:
                await asyncio.shield(mark("end_err", type(exc).__name__))
            except BaseException:  # noqa: S110 (best effort: the run's error is what matters)
                pass
            raise
        await mark("end_ok")

    async def exit_process(key: str) -> None:
        """Poison: kills the worker process it runs in."""
        await mark("start")
        os._exit(17)

    async def strict(key: str, n: int) -> int:
        """Its arguments can be corrupted in the table to test decoding failures."""
        await mark("start")
        return n

    async def outcome(key: str, kind: str) -> Any:
        """One row of the outcome table per ``kind``."""
        job = current().job
        await mark("start")
        if kind == "return":
            return {"key": key}
        if kind == "raise_once" and job.attempt == 1:
            raise RuntimeError("first attempt fails")
        if kind == "retry" and job.attempt == 1:
            raise Retry(timedelta(0))
        if kind == "snooze" and job.run == 1:
            raise Snooze(timedelta(milliseconds=50))
        if kind == "fail":
            raise Fail("told to fail")
        if kind == "cancel":
            raise Cancel()
        if kind == "not_json":
            return datetime.now()
        if kind == "complete_tx":
            await write_effect(key)
            return None
        if kind == "system_exit":
            raise SystemExit(3)
        return kind

    async def slow(key: str, ms: int) -> None:
        """Exceeds its timeout when ``ms`` is over 300."""
        await mark("start")
        await asyncio.sleep(ms / 1000)

    async def canary(key: str, token: str, vault: Vault, mode: str, ms: int = 0) -> Any:
        """Arguments and results full of canaries, for the no-secrets-in-logs scenario."""
        job = current().job
        await mark("start")
        secret = vault.inner.deepest.value
        if ms:
            await asyncio.sleep(ms / 1000)
        if mode == "raise":
            raise RuntimeError("the task failed (no secret in this message)")
        if mode == "raise_canary":
            raise RuntimeError(f"a user's message that quotes {secret}")
        if mode == "retry" and job.attempt == 1:
            raise Retry(timedelta(0))
        if mode == "snooze" and job.run == 1:
            raise Snooze(timedelta(milliseconds=10))
        if mode == "fail":
            raise Fail("failed on purpose")
        if mode == "cancel":
            raise Cancel()
        if mode == "not_json":
            return {"when": datetime.now(), "token": token}
        if mode == "complete_tx":
            await write_effect(key)
        return {"echo": [token, {"deep": {"er": secret}}]}

    async def flaky(key: str, ms: int = 0) -> None:
        """A downstream that is down for every first attempt (which fails at once) and back
        for the retries (which take ``ms``): a retry herd."""
        job = current().job
        if job.attempt == 1:
            raise RuntimeError("the downstream is down")
        await mark("start")
        if ms:
            await asyncio.sleep(ms / 1000)
        await mark("end_ok")

    async def gil(key: str, seconds: float) -> None:
        """Holds the GIL in one C call for ``seconds`` of wall time: libc's usleep called through
        ctypes.PyDLL, which keeps the GIL (as a C extension blocking without releasing it
        would), so no thread of its worker runs meanwhile, however fast or busy the machine."""
        await mark("start")
        ctypes.PyDLL(None).usleep(int(seconds * 1_000_000))
        await mark("end_ok")

    async def tick() -> None:
        """The scheduled task: its effect is keyed by its job, one per fire time."""
        job = current().job
        await mark("start")
        await write_effect(f"tick-{job.id}")
        await mark("end_ok")

    zero = lambda attempt: timedelta(0)  # noqa: E731 (a one-line policy)
    # a timeout, as every task using connections should have one: a connection that goes
    # silent (half-open) inside complete_tx holds the run until then
    app.register(work, name="fault.work", queue=QUEUE, max_attempts=10, timeout=timedelta(seconds=10))
    app.register(tick, name="fault.tick", queue=QUEUE, max_attempts=10)
    herd_backoff = lambda attempt: timedelta(seconds=HERD_BACKOFF_S)  # noqa: E731 (a one-line policy)
    app.register(flaky, name="fault.flaky", queue=HERD_QUEUE, max_attempts=3, backoff=herd_backoff)
    app.register(
        flaky,
        name="fault.flaky.yielding",
        queue=HERD_QUEUE,
        max_attempts=3,
        backoff=herd_backoff,
        retry_priority=-1,
    )
    app.register(gil, name="fault.gil", queue=QUEUE, max_attempts=3)
    app.register(exit_process, name="fault.exit", queue=QUEUE, max_attempts=3)
    app.register(strict, name="fault.strict", queue=QUEUE, max_attempts=2, backoff=zero)
    app.register(outcome, name="fault.outcome", queue=QUEUE, max_attempts=2, backoff=zero)
    app.register(
        canary,
        name="fault.canary",
        queue=QUEUE,
        max_attempts=2,
        backoff=zero,
        timeout=timedelta(milliseconds=2500),
    )
    app.register(
        slow,
        name="fault.slow",
        queue=QUEUE,
        max_attempts=2,
        backoff=zero,
        timeout=timedelta(milliseconds=300),
    )


def build(database_url: str, ledger_dsn: str, *, pool_size: int | None = None) -> tuple[Akadze, Ledger]:
    app = Akadze(database_url=database_url, pool_size=pool_size)
    ledger = Ledger(ledger_dsn)
    register_tasks(app, ledger)
    return app, ledger


def create_app() -> Akadze:
    pool = os.environ.get("AKADZE_FAULTS_POOL")
    app, _ledger = build(
        os.environ["AKADZE_FAULTS_URL"],
        os.environ["AKADZE_FAULTS_LEDGER"],
        pool_size=int(pool) if pool else None,
    )
    every = os.environ.get("AKADZE_FAULTS_SCHEDULE")
    if every:
        app.schedule("tick", app.get_task("fault.tick"), every=timedelta(seconds=float(every)))
    return app
