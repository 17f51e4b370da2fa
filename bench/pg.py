"""The harness's own PostgreSQL work: databases per peer, statistics, noise sampling.

The harness connects to the maintenance database given by --dsn, so its own statements never
count in a bench database's ``pg_stat_database`` row.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg


def dsn_for(dsn: str, database: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, parts.fragment))


@dataclass
class Snapshot:
    xact_commit: int
    xact_rollback: int
    tup_inserted: int
    tup_updated: int
    tup_deleted: int
    wal_lsn: str
    wal_sync: int | None

    def delta(self, later: Snapshot, wal_bytes: int) -> dict[str, Any]:
        return {
            "xacts": later.xact_commit - self.xact_commit,
            "rollbacks": later.xact_rollback - self.xact_rollback,
            "rows_inserted": later.tup_inserted - self.tup_inserted,
            "rows_updated": later.tup_updated - self.tup_updated,
            "rows_deleted": later.tup_deleted - self.tup_deleted,
            "wal_bytes": wal_bytes,
            "wal_syncs": (
                later.wal_sync - self.wal_sync
                if later.wal_sync is not None and self.wal_sync is not None
                else None
            ),
        }


HARNESS_DB = "bench_harness"

#: WAL of one database between two LSNs: records that touch its relations, plus every record of
#: the transactions that did (their commit records carry no relation). Needs pg_walinspect (15+).
WAL_OF_DATABASE = """
WITH r AS (
    SELECT xid, record_length, block_ref
    FROM pg_get_wal_records_info($1::text::pg_lsn, $2::text::pg_lsn)
), mine AS (
    SELECT DISTINCT xid FROM r WHERE xid <> 0 AND block_ref LIKE $3
)
SELECT coalesce(sum(record_length), 0)::bigint AS bytes
FROM r
WHERE block_ref LIKE $3 OR xid IN (SELECT xid FROM mine)
"""


class Admin:
    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn: asyncpg.Connection | None = None
        #: a connection to the harness's own database, where pg_walinspect is installed
        self.wal_conn: asyncpg.Connection | None = None
        self.wal_note = ""
        self.slot = ""

    async def open(self) -> None:
        self.conn = await asyncpg.connect(self.dsn)
        try:
            await self.recreate(HARNESS_DB)
            self.wal_conn = await asyncpg.connect(dsn_for(self.dsn, HARNESS_DB))
            await self.wal_conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
            # A temporary physical slot keeps the WAL of the running step from being recycled by
            # a checkpoint (other clients' DROP DATABASE forces one) before it is read. It is
            # moved up at every step, so it holds at most one step's WAL, and the server drops
            # it when this session ends, even if the harness dies.
            self.slot = f"bench_harness_{os.getpid()}"
            await self.wal_conn.execute(
                "SELECT pg_create_physical_replication_slot($1, true, true)", self.slot
            )
        except (asyncpg.PostgresError, OSError) as exc:
            self.wal_note = f"pg_walinspect unavailable ({exc}); WAL per database not measured"
            if self.wal_conn is not None:
                await self.wal_conn.close()
                self.wal_conn = None

    async def close(self) -> None:
        if self.wal_conn is not None:
            await self.wal_conn.close()
            self.wal_conn = None
        if self.conn is not None:
            with contextlib.suppress(asyncpg.PostgresError):
                await self.drop(HARNESS_DB)
            await self.conn.close()

    async def hold_wal(self) -> None:
        """Keep WAL from now on (and release what the previous step held)."""
        if self.wal_conn is not None and self.slot:
            with contextlib.suppress(asyncpg.PostgresError):
                await self.wal_conn.execute(
                    "SELECT pg_replication_slot_advance($1, pg_current_wal_flush_lsn())",
                    self.slot,
                )

    async def wal_of(self, database: str, start: str, end: str) -> int | None:
        if self.wal_conn is None:
            return None
        oid = await self.c.fetchval("SELECT oid FROM pg_database WHERE datname = $1", database)
        try:
            return int(await self.wal_conn.fetchval(WAL_OF_DATABASE, start, end, f"%/{oid}/%"))
        except asyncpg.PostgresError as exc:  # e.g. a segment recycled by a forced checkpoint
            self.wal_note = f"WAL per database not measured for some steps ({exc})"
            return None

    @property
    def c(self) -> asyncpg.Connection:
        assert self.conn is not None
        return self.conn

    async def server_info(self) -> dict[str, Any]:
        version = await self.c.fetchval("SHOW server_version")
        settings = {
            r["name"]: r["setting"] + (r["unit"] or "")
            for r in await self.c.fetch(
                "SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1::text[])",
                [
                    "shared_buffers",
                    "synchronous_commit",
                    "fsync",
                    "wal_sync_method",
                    "commit_delay",
                    "max_connections",
                    "autovacuum",
                ],
            )
        }
        return {"server_version": version, "settings": settings}

    async def recreate(self, database: str) -> None:
        await self.drop(database)
        await self.c.execute(f'CREATE DATABASE "{database}"')

    async def drop(self, database: str) -> None:
        await self.c.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')

    async def analyze(self, database: str) -> None:
        conn = await asyncpg.connect(dsn_for(self.dsn, database))
        try:
            await conn.execute("ANALYZE")
        finally:
            await conn.close()

    async def wait_idle(self, database: str, timeout: float = 10.0) -> None:
        """Wait until no backend is connected to ``database``: exited backends have then
        flushed their statistics, so the next snapshot counts all of their transactions."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            n = await self.c.fetchval("SELECT count(*) FROM pg_stat_activity WHERE datname = $1", database)
            if n == 0:
                return
            await asyncio.sleep(0.05)

    async def snapshot(self, database: str, *, hold: bool = True) -> Snapshot:
        if hold:  # a step starts: keep its WAL until it has been read
            await self.hold_wal()
        await self.c.execute("SELECT pg_stat_clear_snapshot()")
        row = await self.c.fetchrow(
            "SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted,"
            " pg_current_wal_flush_lsn()::text AS lsn FROM pg_stat_database WHERE datname = $1",
            database,
        )
        wal_sync = None
        with contextlib.suppress(asyncpg.PostgresError):
            wal_sync = await self.c.fetchval("SELECT wal_sync FROM pg_stat_wal")
        return Snapshot(
            row["xact_commit"],
            row["xact_rollback"],
            row["tup_inserted"],
            row["tup_updated"],
            row["tup_deleted"],
            row["lsn"],
            wal_sync,
        )

    async def delta(self, database: str, before: Snapshot) -> dict[str, Any]:
        await self.wait_idle(database)
        after = await self.snapshot(database, hold=False)
        wal = await self.c.fetchval(
            "SELECT pg_wal_lsn_diff($1::text::pg_lsn, $2::text::pg_lsn)::bigint",
            after.wal_lsn,
            before.wal_lsn,
        )
        out = before.delta(after, int(wal))
        out["wal_bytes_db"] = await self.wal_of(database, before.wal_lsn, after.wal_lsn)
        return out

    @contextlib.asynccontextmanager
    async def noise(self, database: str) -> AsyncIterator[dict[str, Any]]:
        """Sample, twice a second, what else runs on the server during a step: active client
        backends of other databases, and autovacuum workers. Uses its own connection."""
        found: dict[str, Any] = {"others_max": 0, "autovacuum_max": 0, "samples": 0}
        conn = await asyncpg.connect(self.dsn)

        async def sample() -> None:
            while True:
                row = await conn.fetchrow(
                    "SELECT count(*) FILTER (WHERE backend_type = 'client backend'"
                    "   AND state = 'active' AND datname IS DISTINCT FROM $1"
                    "   AND pid <> pg_backend_pid() AND query NOT LIKE '%pg_stat_activity%')"
                    "   AS others,"
                    " count(*) FILTER (WHERE backend_type = 'autovacuum worker') AS autovac"
                    " FROM pg_stat_activity",
                    database,
                )
                found["others_max"] = max(found["others_max"], row["others"])
                found["autovacuum_max"] = max(found["autovacuum_max"], row["autovac"])
                found["samples"] += 1
                await asyncio.sleep(0.5)

        task = asyncio.create_task(sample())
        try:
            yield found
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, asyncpg.PostgresError):
                await task
            await conn.close()
