"""What the dashboard's trends cost a drain (issue 34): one worker serving (--slots, every default
service but the trends rollup), draining --jobs no-op jobs, with the rollup off (``trends_off``)
and on (``trends_on``: the service of akadze/worker/trends.py, a pass every --interval-s seconds,
minutes rolled up once they end, settle 0), interleaved, the order rotating each repeat.

    flock /tmp/akadze-bench.lock .venv/bin/python -m bench.trends_cost --jobs 1200000 --repeat 3

The rollup counts whole minutes, so a drain must last minutes for the rollup to read most of its
rows while it runs: each trial reports how many of the drained jobs the rollup had counted when
the worker stopped (``rolled``), the rollup's passes, their wall time and the CPU time its server
process spent on them (read from /proc: the rollup runs on a connection of its own), that CPU per
rolled job, and the machine's CPU per job over the drain (every core's busy time: what a job
costs the machine, against which the rollup's share is read). The throughput ratio is the
direct measure; on a machine shared with other work it is noisy, and the CPU figures are not.
Throughput is the jobs started over the span from the first start to the last; ratios are taken
within a repeat (bench.scale's Harness).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg

from bench.scale import BENCH_DIR, CORES, REPO_DIR, Harness, rate_of

ROLLED_SQL = "SELECT coalesce(sum(jobs), 0) FROM akadze_job_stats WHERE minutes = 1"


async def trial(h: Harness, variant: str) -> dict[str, Any]:
    a = h.args
    url = await h.fresh()
    trends = {"interval_s": a.interval_s, "settle_s": 0.0} if variant == "trends_on" else None
    req = {"dsn": url, "slots": a.slots, "mode": "serve", "expect": a.jobs, "prune": None, "trends": trends}
    results = await h.workers([req], f"trends-{variant}")
    out = rate_of(results)
    out["results"] = results
    conn = await asyncpg.connect(url)
    try:
        out["rolled"] = int(await conn.fetchval(ROLLED_SQL))
    finally:
        await conn.close()
    out["span_s"] = a.jobs / out["rate"]
    [result] = out.pop("results")
    out["rollup_passes"], out["rollup_s"] = result["rollup_passes"], result["rollup_s"]
    out["rollup_cpu_s"] = result["rollup_cpu_s"]
    out["cpu_busy"] = h.cpu_busy
    return out


def table(records: list[dict[str, Any]]) -> str:
    lines = [
        "| variant | jobs/s median (min-max) | ratio to trends_off (per repeat) | drain s "
        "| jobs rolled up during it | rollup passes, s, server CPU s | rollup server CPU µs per rolled job "
        "| machine CPU µs per job (busy share) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in ("trends_off", "trends_on"):
        mine = [r for r in records if r["variant"] == v]
        rates = [r["rate"] for r in mine]
        ratios = [
            r["rate"] / b["rate"]
            for r in mine
            for b in records
            if b["variant"] == "trends_off" and b["rep"] == r["rep"]
        ]
        lines.append(
            f"| {v} | {statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f}) | "
            f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}) | "
            + ", ".join(f"{r['span_s']:.0f}" for r in mine)
            + " | "
            + ", ".join(f"{r['rolled']:,}" for r in mine)
            + " | "
            + "; ".join(f"{r['rollup_passes']}, {r['rollup_s']:.2f}, {r['rollup_cpu_s']:.2f}" for r in mine)
            + " | "
            + ", ".join(f"{1e6 * r['rollup_cpu_s'] / r['rolled']:.2f}" if r["rolled"] else "-" for r in mine)
            + " | "
            + ", ".join(f"{1e6 * r['cpu_busy'] * CORES / r['rate']:.0f} ({r['cpu_busy']:.0%})" for r in mine)
            + " |"
        )
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(REPO_DIR))
    from bench.proc import snapshot_akadze

    stamp = time.strftime("%Y%m%d-%H%M%S")
    snap = BENCH_DIR / ".snapshot" / f"trends-{stamp}"
    src = snapshot_akadze(snap, args.akadze_ref)
    sys.path.insert(0, str(snap))
    log_dir = BENCH_DIR / "logs" / f"trends-{stamp}"
    log_dir.mkdir(parents=True, exist_ok=True)
    h = Harness(args, snap, log_dir)
    meta = {
        "akadze": src,
        "jobs": args.jobs,
        "slots": args.slots,
        "interval_s": args.interval_s,
        "load_start": os.getloadavg(),
    }
    variants = ["trends_off", "trends_on"]
    records: list[dict[str, Any]] = []
    for rep in range(args.repeat):
        for v in variants[rep % 2 :] + variants[: rep % 2]:
            load = os.getloadavg()[0]
            rec = await trial(h, v)
            rec.update(variant=v, rep=rep, load1=load)
            records.append(rec)
            print(
                f"rep {rep} {v}: {rec['rate']:,.0f} jobs/s, rolled {rec['rolled']:,} (load {load:.2f})",
                flush=True,
            )
    meta["load_end"] = os.getloadavg()
    text = table(records)
    print(text)
    Path(args.output).write_text(json.dumps({"meta": meta, "records": records, "table": text}, indent=1))
    print(f"wrote {args.output}")


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.trends_cost", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--jobs", type=int, default=1_200_000)
    ap.add_argument("--slots", type=int, default=50)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--interval-s", type=float, default=10.0, help="seconds between rollup passes")
    ap.add_argument("--akadze-ref", default=None)
    ap.add_argument("--output", default=str(BENCH_DIR / "results" / "trends-cost.json"))
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
