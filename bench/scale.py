"""Scale measurements of issue 19 (docs/performance.md, "Scale"): retention that keeps up, and
many worker processes, direct and through PgBouncer in transaction mode.

    .venv/bin/python -m bench.scale retention --akadze-ref HEAD   # pruning on vs off, one worker
    .venv/bin/python -m bench.scale processes --akadze-ref HEAD   # 1 vs 4 processes, direct vs PgBouncer
    .venv/bin/python -m bench.scale cli_rss --akadze-ref HEAD --base-ref REF   # akadze worker's peak RSS

Every trial starts on a fresh database ``bench_scale`` (dropped and created), migrated, with
--jobs ready no-op jobs enqueued by ``enqueue_many`` and ANALYZEd. Worker processes
(bench/scale_worker.py) import a copy of ``akadze/`` taken at start (the working tree, or the tree
of --akadze-ref), are built, and start together on a ``go``. Throughput is the jobs started over
the span from the first start to the last, across every process. Variants are interleaved and
their order rotates each repeat; figures are medians (min-max), ratios taken within a repeat.

- retention: one worker, --slots 50, serving (a burst run prunes nothing), every default service;
  ``prune_off`` drops the pruner, ``prune_on`` runs it every --interval-s with retention
  --retention-s. Twice a second the harness reads the finished rows, the age of the oldest one,
  the table's rows and size and its dead tuples (the server runs with autovacuum off).
- processes: ``p1_direct`` one process with --slots; ``p4_direct`` four processes sharing the same
  slots; ``p1_bouncer`` and ``p4_bouncer`` the same through PgBouncer (Debian's, transaction mode,
  --pool-size server connections; started as tests/faults/pgbouncer.py starts it). Burst mode.
  ``p4x_direct`` (a diagnostic) gives each of the four processes all --slots: the claim and
  completion batches of one process, four times the slots. ``p1_nosync`` and ``p4_nosync``
  (diagnostics) are p1_direct and p4_direct on a database with ``synchronous_commit = off``: how
  much of the gap is commits waiting for their WAL flush. Each trial also records the machine's
  CPU busy share over the drain (/proc/stat: every process of the machine, not only these).
  ``--variants`` runs some of them (p1_direct always: the ratios' base); ``--task-us N`` makes
  every run spend N µs of CPU before it returns (its thread's clock), for tasks that do work.
- cli_rss: the ``akadze worker scale_worker:cli_app --burst --slots`` command itself (a process
  of its own, as a deployment runs it) drains the jobs; its peak RSS is ``ru_maxrss`` of the
  child, read by a wrapper (RUSAGE_CHILDREN). ``cli_after`` runs --akadze-ref, ``cli_before``
  --base-ref.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
CHILD = BENCH_DIR / "scale_worker.py"
DB = "bench_scale"

SAMPLE_SQL = """
SELECT count(*) FILTER (WHERE state IN ('succeeded', 'failed', 'cancelled')) AS finished,
       extract(epoch FROM now() - min(finished_at)) AS oldest_s,
       count(*) AS rows,
       pg_total_relation_size('akadze_jobs') AS bytes,
       (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'akadze_jobs') AS dead
FROM akadze_jobs
"""


def with_db(dsn: str, db: str, port: int | None = None) -> str:
    base, _, _ = dsn.rpartition("/")
    if port is not None:
        base = base.rsplit(":", 1)[0] + f":{port}"
    return f"{base}/{db}"


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of every CPU of the machine since boot (/proc/stat)."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


class Harness:
    def __init__(self, args: argparse.Namespace, akadze_path: Path, log_dir: Path) -> None:
        self.args = args
        self.akadze_path = akadze_path
        self.log_dir = log_dir
        self.cpu_busy = 0.0

    async def fresh(self) -> str:
        admin = await asyncpg.connect(self.args.dsn)
        try:
            await admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
            await admin.execute(f"CREATE DATABASE {DB}")
        finally:
            await admin.close()
        url = with_db(self.args.dsn, DB)
        from akadze import Akadze

        app = Akadze(database_url=url)
        try:
            await app.migrate()

            @app.task("bench.noop", queue="default")
            async def noop(i: int) -> None: ...

            for first in range(0, self.args.jobs, 5000):
                await noop.enqueue_many([{"i": i} for i in range(first, min(first + 5000, self.args.jobs))])
        finally:
            await app.dispose()
        conn = await asyncpg.connect(url)
        try:
            await conn.execute("ANALYZE akadze_jobs")
        finally:
            await conn.close()
        return url

    async def workers(
        self, requests: list[dict[str, Any]], name: str, sampler: Any = None
    ) -> list[dict[str, Any]]:
        """Start the processes, wait until each is ready, send go, collect the results."""
        env = {**os.environ, "PYTHONPATH": str(self.akadze_path)}
        procs = []
        for n, req in enumerate(requests):
            with open(self.log_dir / f"{name}-{n}.log", "ab") as err:
                procs.append(
                    await asyncio.create_subprocess_exec(
                        sys.executable,
                        str(CHILD),
                        json.dumps(req),
                        stdin=asyncio.subprocess.PIPE,
                        stdout=asyncio.subprocess.PIPE,
                        stderr=err,
                        cwd=str(REPO_DIR),
                        env=env,
                    )
                )
        try:
            async with asyncio.timeout(600):
                for proc in procs:
                    assert proc.stdout is not None
                    msg = json.loads(await proc.stdout.readline())
                    if msg["event"] != "ready":
                        raise RuntimeError(f"{name}: {msg}")
                for proc in procs:
                    assert proc.stdin is not None
                    proc.stdin.write(b"go\n")
                    await proc.stdin.drain()
                busy0, total0 = cpu_ticks()
                sampling = asyncio.create_task(sampler()) if sampler else None
                results = []
                for proc in procs:
                    assert proc.stdout is not None
                    msg = json.loads(await proc.stdout.readline())
                    if msg["event"] != "result":
                        raise RuntimeError(f"{name}: {msg} (see {self.log_dir})")
                    results.append(msg)
                    await proc.wait()
                if sampling is not None:
                    sampling.cancel()
                busy1, total1 = cpu_ticks()
                #: the machine's CPU busy share from the go to the last result
                self.cpu_busy = (busy1 - busy0) / max(1, total1 - total0)
                return results
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()


def rate_of(results: list[dict[str, Any]]) -> dict[str, Any]:
    started = sum(r["started"] for r in results)
    span = max(r["last"] for r in results if r["last"]) - min(r["first"] for r in results if r["first"])
    return {
        "started": started,
        "rate": started / span,
        "per_process": [r["started"] for r in results],
        "maxrss_mb": max(r["maxrss_kb"] for r in results) / 1024,
        "cpu_s": sum(r["cpu_s"] for r in results),
        "tenths": results[0]["tenths"] if len(results) == 1 else None,
    }


async def retention_trial(h: Harness, variant: str) -> dict[str, Any]:
    a = h.args
    url = await h.fresh()
    prune = {"retention_s": a.retention_s, "interval_s": a.interval_s} if variant == "prune_on" else None
    samples: list[dict[str, Any]] = []

    async def sampler() -> None:
        conn = await asyncpg.connect(url)
        try:
            t0 = time.perf_counter()
            while True:
                row = await conn.fetchrow(SAMPLE_SQL)
                samples.append(
                    {
                        "t": time.perf_counter() - t0,
                        **{k: (float(v) if v is not None else None) for k, v in row.items()},
                    }
                )
                await asyncio.sleep(0.5)
        finally:
            await conn.close()

    req = {"dsn": url, "slots": a.slots, "mode": "serve", "expect": a.jobs, "prune": prune}
    results = await h.workers([req], f"retention-{variant}", sampler)
    out = rate_of(results)
    out["samples"] = samples
    out["max_finished"] = max((s["finished"] for s in samples), default=None)
    out["max_oldest_s"] = max((s["oldest_s"] or 0 for s in samples), default=None)
    out["end"] = samples[-1] if samples else None
    return out


#: the cores /proc/stat's busy share is of
CORES = os.cpu_count() or 1

XACTS_SQL = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"


async def processes_trial(h: Harness, variant: str, bouncer_port: int | None) -> dict[str, Any]:
    a = h.args
    url = await h.fresh()
    n = 4 if variant.startswith("p4") else 1
    dsn = with_db(a.dsn, DB, bouncer_port) if variant.endswith("bouncer") else url
    if variant.endswith("nosync"):  # a diagnostic: commits that do not wait for their WAL flush
        admin = await asyncpg.connect(url)
        try:
            await admin.execute(f"ALTER DATABASE {DB} SET synchronous_commit = off")
        finally:
            await admin.close()
    if variant.startswith("p4x"):  # four processes with every slot each: batch sizes as one process's
        slots = [a.slots] * n
    else:
        slots = [a.slots // n + (1 if k < a.slots % n else 0) for k in range(n)]
    reqs = [{"dsn": dsn, "slots": s, "mode": "burst", "prune": None, "task_us": a.task_us} for s in slots]
    conn = await asyncpg.connect(url)
    try:
        before = await conn.fetchval(XACTS_SQL)
        out = rate_of(await h.workers(reqs, f"processes-{variant}"))
        out["cpu_busy"] = h.cpu_busy
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        await asyncio.sleep(1.0)  # exited backends flush their statistics
        out["xacts_per_job"] = (await conn.fetchval(XACTS_SQL) - before) / a.jobs
    finally:
        await conn.close()
    return out


#: runs the command as a child and prints its peak RSS (kB) as the last line
RSS_WRAPPER = (
    "import resource, subprocess, sys; "
    "code = subprocess.run([sys.executable, '-c', "
    "\"import sys; sys.argv[0] = 'akadze'; from akadze.cli import main; main()\", "
    "*sys.argv[1:]]).returncode; "
    "print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


async def cli_rss_trial(h: Harness, variant: str, paths: dict[str, Path]) -> dict[str, Any]:
    url = await h.fresh()
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(paths[variant]), str(BENCH_DIR)]),
        "AKADZE_DATABASE_URL": url,
    }
    argv = [
        "worker",
        "scale_worker:cli_app",
        "--burst",
        "--slots",
        str(h.args.slots),
        "--log-level",
        "WARNING",
    ]
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", RSS_WRAPPER, *argv, stdout=asyncio.subprocess.PIPE, env=env, cwd=str(h.log_dir)
    )
    out, _ = await proc.communicate()
    elapsed = time.perf_counter() - t0
    code, rss_kb = out.decode().split()[-2:]
    if code != "0":
        raise RuntimeError(f"akadze worker exited {code}")
    return {
        "rate": h.args.jobs / elapsed,
        "maxrss_mb": int(rss_kb) / 1024,
        "note": "rate: jobs / process lifetime",
    }


def summary(records: list[dict[str, Any]], variants: list[str], base: str) -> str:
    lines = [
        f"| variant | jobs/s median (min-max) | ratio to {base} (per repeat) | extra |",
        "|---|---|---|---|",
    ]
    for v in variants:
        mine = [r for r in records if r["variant"] == v]
        rates = [r["rate"] for r in mine]
        ratios = [
            r["rate"] / b["rate"]
            for r in mine
            for b in records
            if b["variant"] == base and b["rep"] == r["rep"]
        ]
        extra = ""
        if "note" in mine[0]:
            extra = "peak RSS MB " + ", ".join(f"{r['maxrss_mb']:.2f}" for r in mine)
        elif "max_finished" in mine[0]:
            extra = "max finished rows " + ", ".join(f"{r['max_finished']:.0f}" for r in mine)
            extra += "; oldest finished s " + ", ".join(f"{r['max_oldest_s']:.1f}" for r in mine)
        else:
            extra = "xacts/job " + ", ".join(f"{r['xacts_per_job']:.3f}" for r in mine)
            extra += "; worker CPU ms/job " + ", ".join(
                f"{1000 * r['cpu_s'] / r['started']:.3f}" for r in mine
            )
            extra += "; machine CPU busy " + ", ".join(f"{r['cpu_busy']:.0%}" for r in mine)
            # every core's busy time over the drain per job started: p4x_direct's over p1_direct's
            # is how much dearer a job is when the cores are full (bench.cycle_costs uses it)
            extra += "; machine CPU µs/job " + ", ".join(
                f"{1e6 * r['cpu_busy'] * CORES / r['rate']:.1f}" for r in mine
            )
        lines.append(
            f"| {v} | {statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f}) | "
            f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) | {extra} |"
        )
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(REPO_DIR))
    from bench.proc import snapshot_akadze

    stamp = time.strftime("%Y%m%d-%H%M%S")
    snap = BENCH_DIR / ".snapshot" / f"scale-{stamp}"
    src = snapshot_akadze(snap, args.akadze_ref)
    sys.path.insert(0, str(snap))
    log_dir = BENCH_DIR / "logs" / f"scale-{stamp}"
    log_dir.mkdir(parents=True, exist_ok=True)
    h = Harness(args, snap, log_dir)
    meta = {
        "what": args.what,
        "akadze": src,
        "jobs": args.jobs,
        "slots": args.slots,
        "load_start": os.getloadavg(),
    }
    bouncer = None
    paths: dict[str, Path] = {}
    if args.what == "retention":
        variants, base = ["prune_off", "prune_on"], "prune_off"
        meta.update(retention_s=args.retention_s, interval_s=args.interval_s)
    elif args.what == "cli_rss":
        variants, base = ["cli_after", "cli_before"], "cli_before"
        paths = {"cli_after": snap, "cli_before": snap / "base"}
        meta["base"] = snapshot_akadze(snap / "base", args.base_ref, base=True)
    else:
        variants = ["p1_direct", "p4_direct", "p4x_direct", "p1_bouncer", "p4_bouncer"]
        variants += [] if args.no_diagnostics else ["p1_nosync", "p4_nosync"]
        if args.variants:
            unknown = set(args.variants) - set(variants)
            if unknown or "p1_direct" not in args.variants:
                raise SystemExit(f"--variants: p1_direct and some of {', '.join(variants)}")
            variants = [v for v in variants if v in args.variants]
        meta["task_us"] = args.task_us
        base = "p1_direct"
        from tests.faults.pgbouncer import PgBouncer

        host, port = "127.0.0.1", 5432
        bouncer = PgBouncer(
            Path(tempfile.mkdtemp(prefix="scale-bouncer-")), host, port, pool_size=args.pool_size
        )
        meta["pool_size"] = args.pool_size
    records: list[dict[str, Any]] = []
    try:
        bport = await bouncer.start() if bouncer else None
        for rep in range(args.repeat):
            order = variants[rep % len(variants) :] + variants[: rep % len(variants)]
            for v in order:
                load = os.getloadavg()[0]
                if args.what == "retention":
                    rec = await retention_trial(h, v)
                elif args.what == "cli_rss":
                    rec = await cli_rss_trial(h, v, paths)
                else:
                    rec = await processes_trial(h, v, bport)
                rec.update(variant=v, rep=rep, load1=load)
                records.append(rec)
                print(f"rep {rep} {v}: {rec['rate']:,.0f} jobs/s (load {load:.2f})", flush=True)
    finally:
        if bouncer:
            await bouncer.stop()
    meta["load_end"] = os.getloadavg()
    table = summary(records, variants, base)
    print(table)
    Path(args.output).write_text(json.dumps({"meta": meta, "records": records, "table": table}, indent=1))
    print(f"wrote {args.output}")


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["retention", "processes", "cli_rss"])
    ap.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument(
        "--jobs", type=int, default=None, help="jobs per trial (retention 200,000; processes 40,000)"
    )
    ap.add_argument("--slots", type=int, default=50, help="slots in total")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--retention-s", type=float, default=3.0)
    ap.add_argument("--interval-s", type=float, default=1.0, help="seconds between pruner passes")
    ap.add_argument("--pool-size", type=int, default=20, help="PgBouncer's server connections")
    ap.add_argument(
        "--no-diagnostics", action="store_true", help="processes: leave out p1_nosync and p4_nosync"
    )
    ap.add_argument(
        "--task-us", type=float, default=0.0, help="processes: CPU µs each run spends (0: no-op tasks)"
    )
    ap.add_argument(
        "--variants",
        type=lambda v: v.split(","),
        default=None,
        help="processes: which to run (with p1_direct)",
    )
    ap.add_argument("--akadze-ref", default=None)
    ap.add_argument("--base-ref", default=None, help="cli_rss: the earlier version")
    ap.add_argument("--output", default=None)
    args = ap.parse_args()
    if args.jobs is None:
        args.jobs = {"retention": 200_000, "processes": 40_000, "cli_rss": 20_000}[args.what]
    args.output = args.output or str(BENCH_DIR / "results" / f"scale-{args.what}.json")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
