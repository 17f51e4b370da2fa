"""The soak (issue 19.6): a long run at a steady rate with pruning on, a held-back xmin horizon
and SIGKILL chaos; per minute the enqueue-to-start latency, dead tuples, sizes and worker RSS.

    .venv/bin/python -m bench.soak                    # one hour at half a 40 s max-rate probe
    .venv/bin/python -m bench.soak --minutes 5 --xmin-at 1 --xmin-minutes 2 --kill-every 60

Not in CI. Method and figures: docs/performance-growth.md, "Soak". On a fresh database ``soak``
(dropped at the end unless --keep): the probe (two workers, a producer keeping 5,000 jobs
queued), then the soak on a fresh database again: two ``akadze worker soak_child:cli_app``
processes (every default service, retention --retention), a producer at --rate, a SIGKILL of one
worker (in turn, restarted at once) every --kill-every seconds, a REPEATABLE READ transaction
held from minute --xmin-at for --xmin-minutes, and, the server running with autovacuum off,
``VACUUM (ANALYZE) akadze_jobs`` by the harness after each minute's sample. At the end every
enqueued job must be a row or a pruned row (a statement trigger counts them), finished, and the
rescued ones succeeded.
Writes --output (JSON) and beside it .md (the table) and .png (the chart, bench/soak_child.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg

from bench.proc import snapshot_akadze
from bench.soak_child import log, markdown, rss_mb
from bench.soak_sql import ACCOUNT_SQL, DONE_SQL, IN_FLIGHT_SQL, LATENCY_SQL, TABLE_SQL, TRIGGER_SQL

BENCH_DIR = Path(__file__).resolve().parent
CHILD = BENCH_DIR / "soak_child.py"
DB = "soak"
CLI = "import sys; sys.argv[0] = 'akadze'; from akadze.cli import main; main()"

# -- the harness --------------------------------------------------------------------------------


class Soak:
    def __init__(self, args: argparse.Namespace, snap: Path, log_dir: Path) -> None:
        self.args = args
        base, _, _ = args.dsn.rpartition("/")
        self.url = f"{base}/{DB}"
        self.log_dir = log_dir
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(snap), str(BENCH_DIR)]),
            "AKADZE_DATABASE_URL": self.url,
            "SOAK_RETENTION_S": str(args.retention),
            "SOAK_SLOTS": str(args.slots),
            "SOAK_TASK_MS": str(args.task_ms),
        }
        self.workers: list[asyncio.subprocess.Process] = []
        self.started = 0  # worker processes started (log file names)
        self.events: list[dict[str, Any]] = []
        #: every process started, killed at the end if still alive (a failed run leaves none)
        self.procs: list[asyncio.subprocess.Process] = []

    async def admin(self, sql: str, url: str | None = None) -> None:
        conn = await asyncpg.connect(url or self.args.dsn)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    async def fresh(self) -> None:
        await self.admin(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        await self.admin(f"CREATE DATABASE {DB}")
        migrate = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CLI, "db", "migrate", "--app", "soak_child:cli_app", env=self.env
        )
        if await migrate.wait():
            raise RuntimeError("akadze db migrate failed")
        await self.admin(TRIGGER_SQL, self.url)

    async def start_worker(self) -> asyncio.subprocess.Process:
        argv = ["worker", "soak_child:cli_app", "--slots", str(self.args.slots), "--log-level", "WARNING"]
        with open(self.log_dir / f"worker-{self.started}.log", "ab") as out:
            self.started += 1
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", CLI, *argv, stdout=out, stderr=out, env=self.env, cwd=self.log_dir
            )
        self.procs.append(proc)
        return proc

    async def producer(self, rate: float) -> asyncio.subprocess.Process:
        with open(self.log_dir / "producer.log", "ab") as err:
            pipe = asyncio.subprocess.PIPE
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                str(CHILD),
                "--producer",
                str(rate),
                stdin=pipe,
                stdout=pipe,
                stderr=err,
                env=self.env,
            )
        self.procs.append(proc)
        assert proc.stdout is not None and proc.stdin is not None
        if json.loads(await proc.stdout.readline())["event"] != "ready":
            raise RuntimeError("producer did not start")
        proc.stdin.write(b"go\n")
        await proc.stdin.drain()
        return proc

    async def stop_producer(self, proc: asyncio.subprocess.Process) -> dict[str, Any]:
        assert proc.stdout is not None and proc.stdin is not None
        proc.stdin.write(b"stop\n")
        await proc.stdin.drain()
        while True:
            msg = json.loads(await proc.stdout.readline())
            if msg["event"] == "result":
                await proc.wait()
                return msg

    async def stop_workers(self) -> None:
        for w in self.workers:
            if w.returncode is None:
                w.send_signal(signal.SIGTERM)
        for w in self.workers:
            await w.wait()

    async def probe(self) -> dict[str, Any]:
        """Two workers kept busy by the producer (rate 0: a backlog of at most BACKLOG jobs); the
        finished jobs per second of the second half."""
        await self.fresh()
        self.workers = [await self.start_worker() for _ in range(2)]
        await asyncio.sleep(3)
        prod = await self.producer(0)
        conn = await asyncpg.connect(self.url)
        try:
            await asyncio.sleep(self.args.probe_s / 2)
            a = await conn.fetchval("SELECT clock_timestamp()")
            await asyncio.sleep(self.args.probe_s / 2)
            b = await conn.fetchval("SELECT clock_timestamp()")
            done = await conn.fetchval(DONE_SQL, a, b)
            sent = (await self.stop_producer(prod))["sent"]
            queued = await conn.fetchval("SELECT count(*) FROM akadze_jobs WHERE state = 'queued'")
        finally:
            await conn.close()
        await self.stop_workers()
        rate = done / (b - a).total_seconds()
        log(f"probe: {rate:,.0f} jobs/s finished; producer sent {sent:,}, {queued:,} left queued")
        return {"max_rate": rate, "sent": sent, "queued_at_end": queued, "seconds": self.args.probe_s}

    async def chaos(self, t0: float) -> None:
        """Every --kill-every seconds SIGKILL one worker (in turn) and start another at once; the
        jobs the killed one left running (its akadze_workers row stays until it is declared lost)
        are the ones the rescue must bring back."""
        conn = await asyncpg.connect(self.url)
        k = 0
        try:
            while True:
                await asyncio.sleep(t0 + (k + 1) * self.args.kill_every - time.monotonic())
                victim = self.workers[k % 2]
                victim.kill()
                await victim.wait()
                self.workers[k % 2] = await self.start_worker()
                left = await conn.fetchval(IN_FLIGHT_SQL, victim.pid)
                self.events.append(
                    {"t": time.monotonic() - t0, "event": "kill", "worker": k % 2, "running": left}
                )
                log(f"SIGKILL worker {k % 2} (pid {victim.pid}; {left} jobs left running), restarted")
                k += 1
        finally:
            await conn.close()

    async def hold_xmin(self, t0: float) -> None:
        a = self.args
        await asyncio.sleep(t0 + a.xmin_at * 60 - time.monotonic())
        conn = await asyncpg.connect(self.url)
        try:
            await conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            await conn.fetchval("SELECT count(*) FROM akadze_jobs WHERE state = 'queued'")
            self.events.append({"t": time.monotonic() - t0, "event": "xmin_hold"})
            log(f"xmin: holding a REPEATABLE READ snapshot for {a.xmin_minutes} min")
            await asyncio.sleep(a.xmin_minutes * 60)
            await conn.execute("ROLLBACK")
            self.events.append({"t": time.monotonic() - t0, "event": "xmin_release"})
            log("xmin: released")
        finally:
            await conn.close()

    async def sample(self, conn: Any, minute: int, a: Any, b: Any, sent: int) -> dict[str, Any]:
        await conn.execute("SELECT pg_stat_clear_snapshot()")
        lat = dict(await conn.fetchrow(LATENCY_SQL, a, b))
        row = dict(await conn.fetchrow(TABLE_SQL))
        rec: dict[str, Any] = {
            "minute": minute,
            "load1": os.getloadavg()[0],
            "sent": sent,
            **{k: float(v) if v is not None else None for k, v in lat.items()},
            "done": await conn.fetchval(DONE_SQL, a, b),
            **{k: int(v) if v is not None else None for k, v in row.items()},
            "rss_mb": [rss_mb(w.pid) for w in self.workers],
        }
        if self.args.vacuum:
            v0 = time.monotonic()
            await conn.execute("VACUUM (ANALYZE) akadze_jobs")
            rec["vacuum_s"] = time.monotonic() - v0
            await asyncio.sleep(1.0)  # the vacuum's counts reach the statistics
            await conn.execute("SELECT pg_stat_clear_snapshot()")
            rec["dead_after_vacuum"] = await conn.fetchval(
                "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'akadze_jobs'"
            )
        return rec

    async def soak(self, rate: float) -> dict[str, Any]:
        a = self.args
        await self.fresh()
        self.workers = [await self.start_worker() for _ in range(2)]
        await asyncio.sleep(3)
        conn = await asyncpg.connect(self.url)
        prod = await self.producer(rate)
        t0 = time.monotonic()
        sent = 0

        async def counts() -> None:
            nonlocal sent
            assert prod.stdout is not None
            while (line := await prod.stdout.readline()) and (msg := json.loads(line))["event"] == "count":
                sent = msg["sent"]

        background = [asyncio.create_task(counts())]
        if a.kill_every > 0:
            background.append(asyncio.create_task(self.chaos(t0)))
        if a.xmin_minutes > 0:
            background.append(asyncio.create_task(self.hold_xmin(t0)))
        minutes: list[dict[str, Any]] = []
        try:
            start = await conn.fetchval("SELECT clock_timestamp()")
            for m in range(a.minutes):
                await asyncio.sleep(t0 + 60 * (m + 1) - time.monotonic())
                end = await conn.fetchval("SELECT clock_timestamp()")
                rec = await self.sample(conn, m + 1, start, end, sent)
                minutes.append(rec)
                start = end
                log(
                    f"min {m + 1}: p99 {rec['p99_ms'] or 0:,.0f} ms, done {rec['done']:,}, "
                    f"dead {rec['dead']:,}, table {rec['table_bytes'] / 2**20:,.1f} MB, "
                    f"indexes {rec['index_bytes'] / 2**20:,.1f} MB, "
                    f"RSS {', '.join(f'{r or 0:.1f}' for r in rec['rss_mb'])} MB, load {rec['load1']:.2f}"
                )
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
        produced = await self.stop_producer(prod)
        try:
            end = await self.work_off(conn)
        finally:
            await self.stop_workers()
        await asyncio.sleep(1.0)
        account = [dict(r) for r in await conn.fetch(ACCOUNT_SQL)]
        await conn.close()
        total = sum(r["n"] for r in account)
        lost = produced["sent"] - total
        unfinished = sum(r["n"] for r in account if r["state"] not in ("succeeded", "failed", "cancelled"))
        bad_rescues = sum(r["n"] for r in account if r["again"] and r["state"] != "succeeded")
        return {
            "rate": rate,
            "minutes": minutes,
            "events": self.events,
            "producer": produced,
            "work_off_s": end,
            "account": account,
            "rows_total": total,
            "lost": lost,
            "unfinished": unfinished,
            "rescued_not_succeeded": bad_rescues,
            "ok": lost == 0 and unfinished == 0 and bad_rescues == 0 and produced["errors"] == 0,
        }

    async def work_off(self, conn: Any) -> float | None:
        """Wait until no job is queued or running (a killed worker's jobs wait for the rescue)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < 300:
            left = await conn.fetchval(
                "SELECT count(*) FROM akadze_jobs WHERE state IN ('queued', 'running')"
            )
            if left == 0:
                return time.monotonic() - t0
            await asyncio.sleep(1.0)
        return None


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    snap = BENCH_DIR / ".snapshot" / f"soak-{stamp}"
    src = snapshot_akadze(snap, args.akadze_ref)
    log_dir = BENCH_DIR / "logs" / f"soak-{stamp}"
    log_dir.mkdir(parents=True, exist_ok=True)
    conn = await asyncpg.connect(args.dsn)
    autovacuum = await conn.fetchval("SHOW autovacuum")
    await conn.close()
    vacuum = (
        "VACUUM (ANALYZE) akadze_jobs by the harness after every minute's sample" if args.vacuum else "none"
    )
    log(f"server autovacuum = {autovacuum}; vacuum in this run: {vacuum}")
    meta = {
        "akadze": src,
        "autovacuum": autovacuum,
        "vacuum": vacuum,
        "load_start": os.getloadavg(),
        "started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        **{k: v for k, v in vars(args).items() if k not in ("dsn", "output")},
    }
    s = Soak(args, snap, log_dir)
    try:
        probe = None
        rate = args.rate
        if rate is None:
            probe = await s.probe()
            rate = probe["max_rate"] / 2
        log(f"soak: {args.minutes} min at {rate:,.0f} jobs/s, retention {args.retention:g} s")
        result = await s.soak(rate)
    finally:
        for proc in s.procs:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        if not args.keep:
            await s.admin(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    meta["load_end"] = os.getloadavg()
    return {"meta": meta, "probe": probe, "soak": result}


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--minutes", type=int, default=60)
    ap.add_argument("--rate", type=float, default=None, help="jobs/s (default: half the probe's)")
    ap.add_argument("--probe-s", type=float, default=40.0)
    ap.add_argument("--retention", type=float, default=120.0, help="seconds (at least 90: see the doc)")
    ap.add_argument("--xmin-at", type=float, default=None, help="minute (default: a phase centred)")
    ap.add_argument("--xmin-minutes", type=float, default=5.0, help="0: no xmin phase")
    ap.add_argument("--kill-every", type=float, default=300.0, help="seconds; 0: no chaos")
    ap.add_argument("--slots", type=int, default=25, help="per worker process (two of them)")
    ap.add_argument("--task-ms", type=float, default=5.0, help="what the task sleeps")
    ap.add_argument("--vacuum", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--keep", action="store_true", help="keep the soak database")
    ap.add_argument("--akadze-ref", default=None)
    ap.add_argument("--output", default=str(BENCH_DIR / "results" / "soak.json"))
    args = ap.parse_args()
    if args.xmin_at is None:
        args.xmin_at = max(0.0, (args.minutes - args.xmin_minutes) / 2)
    res = asyncio.run(main_async(args))
    out = Path(args.output)
    out.write_text(json.dumps(res, indent=1, default=str))
    table = markdown(res["soak"])
    out.with_suffix(".md").write_text(table + "\n")
    print(table)
    soak = res["soak"]
    print(
        f"enqueued {soak['producer']['sent']:,} ({soak['producer']['errors']} errors), rows + pruned "
        f"{soak['rows_total']:,}, lost {soak['lost']:,}, unfinished {soak['unfinished']:,}, "
        f"rescued not succeeded {soak['rescued_not_succeeded']:,}: {'OK' if soak['ok'] else 'FAILED'}"
    )
    python = BENCH_DIR / ".venvs" / "plot" / "bin" / "python"
    subprocess.run([str(python), str(CHILD), "--plot", str(out), str(out.with_suffix(".png"))], check=False)
    print(f"wrote {out} and its .md and .png")


if __name__ == "__main__":
    main()
