"""The ledger the checker reads: tables beside akadze's in the scenario's database.

- ``chk_exec``: every start and end of a run, written by the task on its own autocommit
  connection (an external side effect: it survives a rollback of the job's transaction).
- ``chk_effect``: the transactional effect, written inside ``complete_tx``; its primary key
  makes a second effect impossible, and a second *attempt* to write one that commits is kept
  in ``chk_dup_effect`` (it can only commit if fencing failed).
- ``chk_transition``: an audit trigger on ``akadze_jobs`` records every state or run change.
- ``chk_fault``: what the harness did and when (database clock).

The failover scenario keeps ``chk_exec`` and ``chk_fault`` in a database of another server
(``install_records``): the servers it kills must not take the record of what ran with them.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import asyncpg

#: the records of what ran and what the harness did
RECORDS = """
CREATE TABLE IF NOT EXISTS chk_exec (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    run integer NOT NULL,
    attempt integer NOT NULL,
    worker text NOT NULL,
    pid integer NOT NULL,
    phase text NOT NULL CHECK (phase IN ('start', 'end_ok', 'end_err')),
    detail text,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS chk_exec_job_idx ON chk_exec (job_id);

CREATE TABLE IF NOT EXISTS chk_fault (
    id bigserial PRIMARY KEY,
    kind text NOT NULL,
    target text NOT NULL,
    detail text,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);

"""

#: what stays in the scenario's own database whatever holds the records above
AUDIT = """
CREATE TABLE IF NOT EXISTS chk_effect (
    job_id bigint PRIMARY KEY,
    key text NOT NULL UNIQUE,
    run integer NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE IF NOT EXISTS chk_dup_effect (
    job_id bigint NOT NULL,
    key text NOT NULL,
    run integer NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE IF NOT EXISTS chk_transition (
    id bigserial PRIMARY KEY,
    job_id bigint NOT NULL,
    old_state text,
    new_state text NOT NULL,
    old_run integer,
    new_run integer NOT NULL,
    old_attempt integer,
    new_attempt integer NOT NULL,
    max_attempts integer NOT NULL,
    error_type text,
    at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX IF NOT EXISTS chk_transition_job_idx ON chk_transition (job_id);


CREATE OR REPLACE FUNCTION chk_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO chk_transition (job_id, new_state, new_run, new_attempt, max_attempts)
        VALUES (NEW.id, NEW.state, NEW.run, NEW.attempt, NEW.max_attempts);
    ELSIF NEW.state IS DISTINCT FROM OLD.state OR NEW.run IS DISTINCT FROM OLD.run THEN
        INSERT INTO chk_transition (
            job_id, old_state, new_state, old_run, new_run, old_attempt, new_attempt,
            max_attempts, error_type
        )
        VALUES (
            NEW.id, OLD.state, NEW.state, OLD.run, NEW.run, OLD.attempt, NEW.attempt,
            NEW.max_attempts,
            CASE WHEN NEW.errors IS DISTINCT FROM OLD.errors THEN NEW.errors -> -1 ->> 'type' END
        );
    END IF;
    RETURN NEW;
END
$$;

DROP TRIGGER IF EXISTS chk_audit ON akadze_jobs;
CREATE TRIGGER chk_audit AFTER INSERT OR UPDATE ON akadze_jobs
    FOR EACH ROW EXECUTE FUNCTION chk_audit();
"""

DDL = RECORDS + AUDIT


async def install(dsn: str, ddl: str = DDL) -> None:
    """Create the ledger tables and the audit trigger (akadze's schema must exist); with
    ``ddl=AUDIT`` only what must live beside akadze's tables, with ``RECORDS`` the rest."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(ddl)
    finally:
        await conn.close()


async def record_fault(dsn: str, kind: str, target: str, detail: str = "") -> None:
    """Note a fault on a direct connection; best effort (the database may be the fault)."""
    try:
        conn = await asyncpg.connect(dsn, timeout=5)
    except Exception:
        return
    try:
        await conn.execute(
            "INSERT INTO chk_fault (kind, target, detail) VALUES ($1, $2, $3)", kind, target, detail
        )
    except Exception:  # noqa: S110 (best effort: a fault note must not fail the scenario)
        pass
    finally:
        await conn.close()


class Ledger:
    """The task side: start/end records on a small pool of its own (never akadze's engine).

    The pool is made lazily on the running loop, so one Ledger serves a worker process or
    an in-process test; ``close()`` ends it.
    """

    def __init__(self, dsn: str, *, worker: str | None = None) -> None:
        self.dsn = dsn
        self.worker = worker or os.environ.get("AKADZE_FAULTS_WORKER", f"inproc:{os.getpid()}")
        self._pool: Any = None
        self._lock: asyncio.Lock | None = None

    async def _get(self) -> Any:
        if self._pool is None:
            if self._lock is None:
                self._lock = asyncio.Lock()
            async with self._lock:
                if self._pool is None:
                    self._pool = await asyncpg.create_pool(
                        self.dsn, min_size=0, max_size=4, timeout=10, command_timeout=10
                    )
        return self._pool

    async def mark(self, job_id: int, run: int, attempt: int, phase: str, detail: str | None = None) -> None:
        pool = await self._get()
        await pool.execute(
            "INSERT INTO chk_exec (job_id, run, attempt, worker, pid, phase, detail) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7)",
            job_id,
            run,
            attempt,
            self.worker,
            os.getpid(),
            phase,
            detail,
        )

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()
