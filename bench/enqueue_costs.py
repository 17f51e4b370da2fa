"""Where an enqueue's time goes: ``python -m bench.enqueue_costs [--batch 1000] [--ablation]``.

Ways of inserting the same jobs, one autocommit statement per call, interleaved in rounds on
one database (``bench_enqueue_costs``, made and dropped here):

- ``raw``: the bench's raw asyncpg baseline (bench/adapters/adapter_raw.py: its table of eight
  columns and two indexes; one job per call: its insert with a NOTIFY; a batch: its ``unnest``
  insert, then its NOTIFY);
- ``raw_on_akadze``: raw asyncpg running akadze's own statement (enqueue_now.sql, or
  enqueue_batch.sql with ``--batch``, prepared by asyncpg) on akadze's table, with the
  parameters akadze sends;
- ``akadze``: ``task.enqueue(...)`` (``task.enqueue_many(...)`` with ``--batch``);
- with ``--ablation``, ``raw_on_akadze`` again on copies of akadze's table that each lack a
  part of it (the same columns, defaults and identity): ``no_checks`` (its three CHECK
  constraints), ``no_many_idx`` (akadze_jobs_claim_many_idx, the many-queue claim's index),
  ``no_other_idx`` (the eight partial indexes a queued job never enters) and ``bare`` (none of
  those: the primary key and akadze_jobs_claim_idx alone). What each part costs the server.

``raw_on_akadze ÷ raw`` is what akadze's table and statement cost the server (the row, its
indexes, the write-ahead log); ``akadze ÷ raw_on_akadze`` is what akadze's Python costs. Each
way reports the server backend's CPU per call (/proc of its connection's backend: the server
must run on this machine) beside the client's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg

DB = "bench_enqueue_costs"

#: akadze_jobs' indexes a queued job enters (by name, less the table's prefix); the others are
#: partial indexes of running or finished jobs that an enqueue only tests its row against
QUEUED_INDEXES = ("pkey", "claim_idx", "claim_many_idx")
#: the copies of --ablation: name -> (which of akadze_jobs' indexes it lacks, whether it keeps
#: the CHECK constraints); "others" stands for every index not in QUEUED_INDEXES
ABLATIONS: dict[str, tuple[tuple[str, ...], bool]] = {
    "no_checks": ((), False),
    "no_many_idx": (("claim_many_idx",), True),
    "no_other_idx": (("others",), True),
    "bare": (("claim_many_idx", "others"), False),
}


def backend_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a server backend (the server runs on this machine)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _copy_table(conn: asyncpg.Connection, name: str, lacks: tuple[str, ...], checks: bool) -> None:
    """A copy of akadze_jobs named ``name``: its columns, defaults and identity, its indexes
    but those ``lacks`` names, and its CHECK constraints when ``checks``."""
    await conn.execute(f"CREATE TABLE {name} (LIKE akadze_jobs INCLUDING DEFAULTS INCLUDING IDENTITY)")
    for row in await conn.fetch("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'akadze_jobs'"):
        suffix = row["indexname"].removeprefix("akadze_jobs_")
        if suffix in lacks or ("others" in lacks and suffix not in QUEUED_INDEXES):
            continue
        ddl = row["indexdef"].replace(row["indexname"], f"{name}_{suffix}", 1)
        await conn.execute(ddl.replace(" ON public.akadze_jobs ", f" ON public.{name} ", 1))
    if checks:
        for row in await conn.fetch(
            "SELECT conname, pg_get_constraintdef(oid) AS def FROM pg_constraint"
            " WHERE conrelid = 'akadze_jobs'::regclass AND contype = 'c'"
        ):
            await conn.execute(f"ALTER TABLE {name} ADD CONSTRAINT {name}_{row['conname']} {row['def']}")


async def run(dsn: str, rounds: int, calls: int, batch: int, ablation: bool) -> None:
    sys.path.insert(0, str(Path(__file__).parent / "adapters"))
    from adapter_raw import CHANNEL, INSERT_MANY, INSERT_ONE, SCHEMA

    from akadze import Akadze
    from akadze.db.queries.enqueue import _new_params
    from akadze.db.sql import statement

    admin = await asyncpg.connect(dsn)
    await admin.execute(f"DROP DATABASE IF EXISTS {DB}")
    await admin.execute(f"CREATE DATABASE {DB}")
    url = dsn.rsplit("/", 1)[0] + f"/{DB}"
    app = Akadze(database_url=url)

    @app.task("bench.noop", queue="default")
    async def noop(i: int) -> None: ...

    try:
        await app.migrate()
        raw = await asyncpg.connect(url)
        await raw.execute(SCHEMA)
        stmt = statement("enqueue_batch" if batch > 1 else "enqueue_now")
        new = noop._new_jobs()

        def items(i: int) -> list[dict[str, int]]:
            return [{"i": n} for n in range(i * batch, (i + 1) * batch)]

        def akadze_params(i: int) -> list[Any]:
            args = (
                "[" + ",".join(json.dumps(item) for item in items(i)) + "]"
                if batch > 1
                else json.dumps({"i": i})
            )
            every = _new_params(new, args)
            return [every[name] for name in stmt.params]

        async def raw_insert(i: int) -> None:
            if batch > 1:
                await raw.execute(INSERT_MANY, [json.dumps(item) for item in items(i)])
                await raw.execute(f"NOTIFY {CHANNEL}")
            else:
                await raw.fetchrow(INSERT_ONE, json.dumps({"i": i}))

        def on_table(table: str) -> Callable[[int], Awaitable[None]]:
            # the insert's table only: the NOTIFY keeps its channel
            text = stmt.pg.replace("INSERT INTO akadze_jobs ", f"INSERT INTO {table} ", 1)
            assert table == "akadze_jobs" or text != stmt.pg

            async def insert(i: int) -> None:
                await raw.fetch(text, *akadze_params(i))

            return insert

        async def akadze(i: int) -> None:
            if batch > 1:
                await noop.enqueue_many(items(i))
            else:
                await noop.enqueue(i=i)

        ways: dict[str, Callable[[int], Awaitable[None]]] = {
            "raw": raw_insert,
            "raw_on_akadze": on_table("akadze_jobs"),
            "akadze": akadze,
        }
        if ablation:
            for name, (lacks, checks) in ABLATIONS.items():
                table = f"akadze_jobs_{name}"
                await _copy_table(raw, table, lacks, checks)
                ways[name] = on_table(table)
        pids = {name: raw.get_server_pid() for name in ways}
        async with app.engine.connect() as conn:  # the pool's one connection, which akadze's calls reuse
            pids["akadze"] = (await conn.exec_driver_sql("SELECT pg_backend_pid()")).scalar_one()
        for way in ways.values():  # connections opened, statements prepared, caches warm
            for i in range(max(3, 50 // batch)):
                await way(i)
        rates: dict[str, list[float]] = {name: [] for name in ways}
        cpu: dict[str, list[float]] = {name: [] for name in ways}
        server: dict[str, list[float]] = {name: [] for name in ways}
        for r in range(rounds):
            order = list(ways)[r % len(ways) :] + list(ways)[: r % len(ways)]
            for name in order:
                t0, c0, s0 = time.perf_counter(), time.process_time(), backend_cpu_s(pids[name])
                for i in range(calls):
                    await ways[name](i)
                elapsed = time.perf_counter() - t0
                rates[name].append(calls * batch / elapsed)
                cpu[name].append((time.process_time() - c0) / calls * 1e6)
                server[name].append((backend_cpu_s(pids[name]) - s0) / calls * 1e6)
        await raw.close()
    finally:
        await app.dispose()
        await admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        await admin.close()

    unit = f"calls of {batch}" if batch > 1 else "calls"
    print(f"{rounds} rounds of {calls} {unit} each, interleaved\n")
    print("| way | jobs/s median (min-max) | client CPU µs/call | server CPU µs/call | ÷ raw (per round) |")
    print("|---|---|---|---|---|")
    for name in ways:
        ratios = [a / b for a, b in zip(rates[name], rates["raw"], strict=True)]
        spread = f"{min(rates[name]):,.0f}-{max(rates[name]):,.0f}"
        print(
            f"| {name} | {statistics.median(rates[name]):,.0f} ({spread}) "
            f"| {statistics.median(cpu[name]):.0f} | {statistics.median(server[name]):.0f} "
            f"| {statistics.median(ratios):.2f}x |"
        )
    ratios = [a / b for a, b in zip(rates["akadze"], rates["raw_on_akadze"], strict=True)]
    print(f"\nakadze ÷ raw_on_akadze (per round, median): {statistics.median(ratios):.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=None, help="per round (default: 2000; 20 with --batch)")
    ap.add_argument("--batch", type=int, default=1, help="jobs per call (1: one by one)")
    ap.add_argument("--ablation", action="store_true", help="also the copies of the table that lack a part")
    args = ap.parse_args()
    calls = args.calls or (2000 if args.batch == 1 else 20)
    asyncio.run(run(args.dsn, args.rounds, calls, args.batch, args.ablation))


if __name__ == "__main__":
    main()
