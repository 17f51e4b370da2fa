"""Where a single enqueue's time goes: ``python -m bench.enqueue_costs [--dsn URL]``.

Three ways of inserting one job per call, one autocommit statement each, interleaved in rounds
on one database (``bench_enqueue_costs``, made and dropped here):

- ``raw``: the bench's raw asyncpg baseline (bench/adapters/adapter_raw.py: its table of eight
  columns and two indexes, its insert with a NOTIFY);
- ``raw_on_akadze``: raw asyncpg running akadze's own statement (enqueue_now.sql, prepared by
  asyncpg) on akadze's table, with the parameters akadze sends;
- ``akadze``: ``task.enqueue(...)``.

``raw_on_akadze ÷ raw`` is what akadze's table and statement cost the server (the row, its
indexes, the write-ahead log); ``akadze ÷ raw_on_akadze`` is what akadze's Python costs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg

DB = "bench_enqueue_costs"


async def run(dsn: str, rounds: int, calls: int) -> None:
    sys.path.insert(0, str(Path(__file__).parent / "adapters"))
    from adapter_raw import INSERT_ONE, SCHEMA

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
        stmt = statement("enqueue_now")
        new = noop._new_jobs()

        async def raw_insert(i: int) -> None:
            await raw.fetchrow(INSERT_ONE, json.dumps({"i": i}))

        async def raw_on_akadze(i: int) -> None:
            every = _new_params(new, json.dumps({"i": i}))
            await raw.fetchrow(stmt.pg, *[every[name] for name in stmt.params])

        async def akadze(i: int) -> None:
            await noop.enqueue(i=i)

        ways: dict[str, Any] = {"raw": raw_insert, "raw_on_akadze": raw_on_akadze, "akadze": akadze}
        for way in ways.values():  # connections opened, statements prepared, caches warm
            for i in range(50):
                await way(i)
        rates: dict[str, list[float]] = {name: [] for name in ways}
        cpu: dict[str, list[float]] = {name: [] for name in ways}
        for r in range(rounds):
            order = list(ways)[r % 3 :] + list(ways)[: r % 3]
            for name in order:
                t0, c0 = time.perf_counter(), time.process_time()
                for i in range(calls):
                    await ways[name](i)
                elapsed = time.perf_counter() - t0
                rates[name].append(calls / elapsed)
                cpu[name].append((time.process_time() - c0) / calls * 1e6)
        await raw.close()
    finally:
        await app.dispose()
        await admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        await admin.close()

    print(f"{rounds} rounds of {calls} calls each, interleaved\n")
    print("| way | calls/s median (min-max) | client CPU µs/call | ÷ raw (per round, median) |")
    print("|---|---|---|---|")
    for name in ways:
        ratios = [a / b for a, b in zip(rates[name], rates["raw"], strict=True)]
        spread = f"{min(rates[name]):,.0f}-{max(rates[name]):,.0f}"
        print(
            f"| {name} | {statistics.median(rates[name]):,.0f} ({spread}) "
            f"| {statistics.median(cpu[name]):.0f} | {statistics.median(ratios):.2f}x |"
        )
    ratios = [a / b for a, b in zip(rates["akadze"], rates["raw_on_akadze"], strict=True)]
    print(f"\nakadze ÷ raw_on_akadze (per round, median): {statistics.median(ratios):.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()
    asyncio.run(run(args.dsn, args.rounds, args.calls))


if __name__ == "__main__":
    main()
