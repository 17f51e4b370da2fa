"""Paired drains: the ordinary jobs' drain rate beside held jobs, as ratios of drains seconds
apart (issue 32, point 1).

bench.growth makes a fresh database for every drain, so on a machine whose load moves (shared
with other work) two drains of one repeat may run a minute apart and their ratio spreads from
0.6 to 1.5. Here each table state's database is prepared once (bench.growth's states: its held
jobs loaded, parked and vacuumed), and then, round after round, --jobs ready no-op jobs are
drained in each database in turn (one worker process, ``Worker(app, slots=50).run(burst=True)``,
as bench.growth's), the order reversed every other round, and the table vacuumed after each
drain (the claimed jobs' dead entries otherwise pile up in front of the next drain's ready jobs,
docs/performance-growth.md). Each round's ratio is a state's rate over the first state's rate
in that round; the median over the rounds, and its range.

    flock /tmp/akadze-bench.lock .venv/bin/python -m bench.growth_paired --akadze-ref HEAD \\
        --states limited_empty,empty,held_1m_parked,hot_key_parked --rounds 8
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg

from bench.growth import BENCH_DIR, LIMITED, READY_SQL, Harness, log, uptime


async def prepare(h: Harness, state: str) -> str:
    """A database in ``state`` (bench.growth's loading), vacuumed; its DSN."""
    dsn = await h.fresh(f"paired_{state}")
    conn = await asyncpg.connect(dsn)
    try:
        await h.load(conn, state)
        await conn.execute("VACUUM ANALYZE akadze_jobs")
    finally:
        await conn.close()
    return dsn


async def drain(h: Harness, state: str, dsn: str, first: int) -> dict[str, Any]:
    """--jobs ready jobs (ids ``first`` on) into ``state``'s database, drained by one worker."""
    a = h.args
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(READY_SQL, first, first + a.jobs - 1, *h.row_args())
        await conn.execute("ANALYZE akadze_jobs")
        load1 = os.getloadavg()[0]
        res = await h.child(
            {
                "cmd": "worker",
                "dsn": dsn,
                "slots": a.slots,
                "expect": a.jobs,
                "sample_every": max(a.jobs // 10, 1),
                "burst": True,
                "held": state in LIMITED,
            },
            f"paired_{state}.drain",
            120 + a.jobs / 20,
        )
        await conn.execute("VACUUM ANALYZE akadze_jobs")
    finally:
        await conn.close()
    if res["started"] != a.jobs:
        raise RuntimeError(f"{state}: the worker started {res['started']} of {a.jobs} jobs")
    # from the worker's start to its first ready job: what a backlog in front costs before the
    # drain's rate begins (a fresh backlog parked by claims, in round 1)
    return {"state": state, "rate": res["rate"], "first_after_s": res.get("first_after_s"), "load1": load1}


def table(states: list[str], records: list[dict[str, Any]]) -> str:
    base = states[0]
    rounds = sorted({r["round"] for r in records})
    rate = {(r["round"], r["state"]): r["rate"] for r in records}
    lines = [
        f"| table state | jobs/s median (min-max) | ratio to {base} in its round: median (min-max) "
        "| per round | first job after (s), per round |",
        "|---|---|---|---|---|",
    ]
    first = {(r["round"], r["state"]): r.get("first_after_s") for r in records}
    for s in states:
        rates = [rate[(n, s)] for n in rounds]
        ratios = [rate[(n, s)] / rate[(n, base)] for n in rounds]
        lines.append(
            f"| {s} | {statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f}) | "
            f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | "
            + ", ".join(f"{x:.2f}" for x in ratios)
            + " | "
            + ", ".join("-" if first[(n, s)] is None else f"{first[(n, s)]:.2f}" for n in rounds)
            + " |"
        )
    return "\n".join(lines)


async def run(args: argparse.Namespace, akadze_path: Path) -> dict[str, Any]:
    states = args.states.split(",")
    h = Harness(args, akadze_path, BENCH_DIR / "logs" / f"paired-{time.strftime('%Y%m%d-%H%M%S')}")
    h.admin = await asyncpg.connect(args.dsn)
    meta: dict[str, Any] = {"uptime_start": uptime(), "options": vars(args).copy()}
    records: list[dict[str, Any]] = []
    try:
        dsns = {}
        for s in states:
            began = time.monotonic()
            dsns[s] = await prepare(h, s)
            log(f"prepared {s} ({time.monotonic() - began:.0f} s)")
        for n in range(args.rounds):
            order = states if n % 2 == 0 else states[::-1]
            for s in order:
                rec = await drain(h, s, dsns[s], 1_000_000_000 + n * args.jobs)
                rec["round"] = n
                records.append(rec)
                log(
                    f"round {n + 1}/{args.rounds} {s}: {rec['rate']:,.0f} jobs/s, first job after "
                    f"{rec['first_after_s']:.2f} s (load {rec['load1']:.1f})"
                )
    finally:
        for s in states:
            await h.drop(f"paired_{s}")
        await h.admin.close()
    meta["uptime_end"] = uptime()
    meta["akadze"] = {k: h.info.get(k) for k in ("version", "imported_from")}
    return {"meta": meta, "records": records, "table": table(states, records)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.growth_paired",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--states", default="limited_empty,empty,held_1m_parked,hot_key_parked")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=20_000, help="ready jobs per drain")
    ap.add_argument("--slots", type=int, default=50)
    ap.add_argument("--held", type=int, default=100_000, help="as bench.growth's --held")
    ap.add_argument("--held-big", type=int, default=1_000_000, help="as bench.growth's --held-big")
    ap.add_argument("--delayed", type=int, default=1_000_000, help="as bench.growth's --delayed")
    ap.add_argument("--finished", type=int, default=1_000_000, help="as bench.growth's --finished")
    ap.add_argument(
        "--akadze-ref", help="measure akadze/ as committed at this git ref (default: working tree)"
    )
    ap.add_argument("--output", type=Path, default=BENCH_DIR / "results" / "growth-paired.json")
    args = ap.parse_args(argv)
    from bench.proc import snapshot_akadze

    with tempfile.TemporaryDirectory(prefix="akadze-paired-") as tmp:
        source = snapshot_akadze(Path(tmp), args.akadze_ref)
        log(f"akadze {source['commit']}; {uptime()}")
        data = asyncio.run(run(args, Path(tmp)))
    data["meta"]["akadze_source"] = source
    data["meta"]["options"]["output"] = str(args.output)
    args.output.write_text(json.dumps(data, indent=1) + "\n")
    print(data["table"])
    log(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
