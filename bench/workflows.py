"""What workflows cost (issue 29), all in one run, each figure beside its baseline of the same run:

    .venv/bin/python -m bench.workflows            # full run (about 10 minutes on 2 cores)
    .venv/bin/python -m bench.workflows --quick    # smoke run, bench/results/quick.workflows.*

1. Fan-out drain: one worker process (50 slots, a no-op task) works off a workflow of --jobs
   steps and one fan-in step after all of them, and, as the baseline, the same --jobs jobs
   enqueued without dependencies (``enqueue_many``). Rate: --jobs over the time from the first
   start to the last (the fan-in's for the workflow), taken inside the worker; each case on a
   fresh database, the order rotating each repeat.
2. Fan-in start delay: a worker (10 slots, poll interval 1 s, LISTEN on) serves while a producer
   enqueues --latency small workflows (--latency-parents steps and a fan-in) and as many plain
   jobs at --latency-rate a second. Delay: the fan-in's start (claim) minus its last parent's
   completion (its ``finished_at``), on the database's clock; the plain jobs' start minus their
   enqueue beside it. p50 and p99 by nearest rank, over every workflow of every repeat.
3. Statements: the messages one ``Workflow.enqueue`` sends for 100 and 10,000 steps (and one
   ``enqueue_many`` of as many plain jobs), counted by a proxy between the client and the server
   (bench/workflows_child.py, ``Counting``): round trips are Syncs and simple Queries, statements
   Executes and simple Queries; the first enqueue of a size on the connection (cold: statements
   prepared) and the next (warm).
4. Waiting steps: the same worker drains --plain-jobs plain jobs on a table with --waiting steps
   waiting for a root in a queue nobody serves, and on one without; the claim under EXPLAIN
   (ANALYZE, BUFFERS) in both states, rolled back.

Worker processes run bench/workflows_child.py with a copy of ``akadze/`` taken at the start.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import asyncpg

from bench.growth import SERVER_SQL, dsn_for, explain, summarise_explains, uptime
from bench.workflows_report import markdown, nearest_rank

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
CHILD = BENCH_DIR / "workflows_child.py"
RESULTS = BENCH_DIR / "results" / "workflows.json"
DOC = BENCH_DIR / "results" / "workflows.md"
QUICK_RESULTS = BENCH_DIR / "results" / "quick.workflows.json"
QUICK_DOC = BENCH_DIR / "results" / "quick.workflows.md"

FAN_IN_DELAY_SQL = """
SELECT extract(epoch FROM j.started_at - max(p.finished_at))::float8 AS delay
FROM akadze_jobs AS j
JOIN akadze_jobs AS p ON p.workflow_id = j.workflow_id AND p.id <> j.id
WHERE j.step = 'join' AND j.started_at IS NOT NULL
GROUP BY j.id, j.started_at
"""
PLAIN_DELAY_SQL = """
SELECT extract(epoch FROM started_at - created_at)::float8 AS delay
FROM akadze_jobs WHERE workflow_id IS NULL AND started_at IS NOT NULL
"""
UNFINISHED_SQL = """
SELECT count(*) FROM akadze_jobs
WHERE queue = 'default' AND (state = 'running' OR (state = 'queued' AND parked IS NULL))
"""
WAITING_SQL = "SELECT count(*) FROM akadze_jobs WHERE state = 'queued' AND parked = 'deps'"


def log(msg: str) -> None:
    print(f"[workflows {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Bench:
    def __init__(self, args: argparse.Namespace, akadze_path: Path, log_dir: Path) -> None:
        self.args = args
        self.akadze_path = akadze_path
        self.log_dir = log_dir
        self.admin: asyncpg.Connection | None = None
        self.info: dict[str, Any] = {}

    @property
    def a(self) -> asyncpg.Connection:
        assert self.admin is not None
        return self.admin

    async def child(self, request: dict[str, Any], log_name: str, timeout: float) -> dict[str, Any]:
        """Run bench/workflows_child.py with the snapshot of akadze and return its result."""
        env = {**os.environ, "PYTHONPATH": str(self.akadze_path)}
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"{log_name}.log", "ab") as err:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                str(CHILD),
                json.dumps(request),
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
                cwd=str(REPO_DIR),
                env=env,
            )
        assert proc.stdout is not None
        try:
            async with asyncio.timeout(timeout):
                async for line in proc.stdout:
                    try:
                        msg: dict[str, Any] = json.loads(line)
                    except ValueError:
                        continue
                    if msg.get("event") == "result":
                        await proc.wait()
                        return msg
                    if msg.get("event") == "error":
                        raise RuntimeError(f"{request['cmd']}: {msg['error']} (see {log_name}.log)")
            raise RuntimeError(f"{request['cmd']} exited ({await proc.wait()}) without a result")
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()

    async def fresh(self, db: str) -> str:
        await self.drop(db)
        await self.a.execute(f'CREATE DATABASE "{db}"')
        dsn = dsn_for(self.args.dsn, db)
        info = await self.child({"cmd": "setup", "dsn": dsn}, f"{db}.setup", 120)
        self.info = self.info or info
        return dsn

    async def drop(self, db: str) -> None:
        await self.a.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')

    # -- 1. the fan-out drain against plain jobs --------------------------------------------------

    async def drain(self, case: str, rep: int) -> dict[str, Any]:
        jobs = self.args.jobs
        db = f"wf_drain_{case}"
        dsn = await self.fresh(db)
        rec: dict[str, Any] = {"case": case, "rep": rep, "load1_start": os.getloadavg()[0]}
        conn = await asyncpg.connect(dsn)
        try:
            res = await self.child(
                {"cmd": "enqueue", "dsn": dsn, "kind": case, "jobs": jobs}, f"{db}.enqueue", 600
            )
            rec["enqueue_s"] = res["seconds"]
            await conn.execute("ANALYZE akadze_jobs")
            await conn.execute("SET jit = off")  # as the worker's claim connection
            rec["complete"] = await self.explain_complete(conn)
            expect = jobs + (1 if case == "fanout" else 0)
            res = await self.child(
                {"cmd": "worker", "dsn": dsn, "slots": self.args.slots, "expect": expect},
                f"{db}.worker.{rep}",
                120 + jobs / 20,
            )
            rec.update(started=res["started"], span_s=res["span_s"], rate=jobs / res["span_s"])
            if case == "fanout":
                rec["fan_in_delay_s"] = await conn.fetchval(FAN_IN_DELAY_SQL)
            rec["unfinished"] = await conn.fetchval(UNFINISHED_SQL)
        finally:
            await conn.close()
            await self.drop(db)
        rec["problems"] = [] if rec["started"] == expect and not rec["unfinished"] else ["not drained"]
        return rec

    # -- 2. the fan-in's start delay ------------------------------------------------------------

    async def latency(self, rep: int) -> dict[str, Any]:
        args = self.args
        db = "wf_latency"
        dsn = await self.fresh(db)
        count, parents = args.latency, args.latency_parents
        expect = count * (parents + 1) + count
        try:
            serving = asyncio.create_task(
                self.child(
                    {"cmd": "worker", "dsn": dsn, "slots": 10, "expect": expect, "poll": 1.0},
                    f"{db}.worker.{rep}",
                    300 + count,
                )
            )
            conn = await asyncpg.connect(dsn)
            try:
                while not await conn.fetchval("SELECT count(*) FROM akadze_workers"):
                    await asyncio.sleep(0.1)
                await asyncio.sleep(1.0)  # its LISTEN in place
                await self.child(
                    {
                        "cmd": "produce",
                        "dsn": dsn,
                        "count": count,
                        "parents": parents,
                        "rate": args.latency_rate,
                    },
                    f"{db}.produce.{rep}",
                    300 + count,
                )
                res = await serving
                fan_in = [r["delay"] for r in await conn.fetch(FAN_IN_DELAY_SQL)]
                plain = [r["delay"] for r in await conn.fetch(PLAIN_DELAY_SQL)]
            finally:
                await conn.close()
        finally:
            await self.drop(db)
        return {"rep": rep, "started": res["started"], "expect": expect, "fan_in": fan_in, "plain": plain}

    # -- 3. statements per enqueue --------------------------------------------------------------

    async def count(self) -> dict[str, Any]:
        db = "wf_count"
        dsn = await self.fresh(db)
        try:
            res = await self.child({"cmd": "count", "dsn": dsn, "sizes": [100, 10_000]}, f"{db}.count", 600)
        finally:
            await self.drop(db)
        return {"counts": res["counts"]}

    # -- 4. the plain claim's drain beside waiting steps ------------------------------------------

    async def waiting(self, case: str, rep: int) -> dict[str, Any]:
        args = self.args
        db = f"wf_waiting_{case}"
        dsn = await self.fresh(db)
        rec: dict[str, Any] = {"case": case, "rep": rep, "load1_start": os.getloadavg()[0]}
        conn = await asyncpg.connect(dsn)
        await conn.execute("SET jit = off")  # as the worker's claim connection
        try:
            if case == "waiting":
                res = await self.child(
                    {"cmd": "enqueue", "dsn": dsn, "kind": "waiting", "jobs": args.waiting},
                    f"{db}.enqueue_waiting",
                    1200,
                )
                rec["waiting_enqueue_s"], rec["workflows"] = res["seconds"], res["workflows"]
            rec["waiting"] = await conn.fetchval(WAITING_SQL)
            await conn.execute("VACUUM ANALYZE akadze_jobs")
            await self.child(
                {"cmd": "enqueue", "dsn": dsn, "kind": "plain", "jobs": args.plain_jobs}, f"{db}.enqueue", 600
            )
            await conn.execute("ANALYZE akadze_jobs")
            rec["claim"] = await self.explain_claim(conn)
            res = await self.child(
                {"cmd": "worker", "dsn": dsn, "slots": args.slots, "expect": args.plain_jobs},
                f"{db}.worker.{rep}",
                120 + args.plain_jobs / 20,
            )
            rec.update(started=res["started"], span_s=res["span_s"], rate=args.plain_jobs / res["span_s"])
            rec["unfinished"] = await conn.fetchval(UNFINISHED_SQL)
            rec["waiting_after"] = await conn.fetchval(WAITING_SQL)
        finally:
            await conn.close()
            await self.drop(db)
        ok = (
            rec["started"] == args.plain_jobs
            and not rec["unfinished"]
            and rec["waiting_after"] == rec["waiting"]
        )
        rec["problems"] = [] if ok else ["not drained, or waiting steps moved"]
        return rec

    def claim_params(self, *, batch: str = "[]", limit: int | None = None) -> list[Any]:
        """claim_completing's parameters: a claim of ``limit`` (the slots) from the default
        queue with the outcomes ``batch``; with ``limit=0`` the outcomes alone."""
        values = {
            "queues": ["default"] if limit != 0 else [],
            "limit": self.args.slots if limit is None else limit,
            "worker_id": str(uuid.uuid4()) if limit != 0 else None,
            "many_queues": 8,
            "batch": batch,
            "max_errors": 20,
        }
        return [values[p] for p in self.info["claim"]["params"]]

    async def explain_complete(self, conn: asyncpg.Connection) -> dict[str, Any]:
        """The outcomes of a claimed batch (every job succeeded) written by claim_completing
        under EXPLAIN (ANALYZE, BUFFERS), claim and all rolled back: what the worker's statement
        costs per batch, plain jobs against workflow steps."""
        sql = self.info["claim"]["sql"]
        runs = []
        for _ in range(5):
            tx = conn.transaction()
            await tx.start()
            try:
                claimed = await conn.fetch(sql, *self.claim_params())
                batch = [
                    {
                        "id": r["id"],
                        "run": r["run"],
                        "state": "succeeded",
                        "attempt": r["attempt"],
                        "delay_s": 0.0,
                        "result": None,
                        "error": None,
                        "cancellable": True,
                    }
                    for r in claimed
                    if r["id"] is not None
                ]
                runs.append(await explain(conn, sql, self.claim_params(batch=json.dumps(batch), limit=0)))
            finally:
                await tx.rollback()
        return summarise_explains(runs)

    async def explain_claim(self, conn: asyncpg.Connection) -> dict[str, Any]:
        claim = self.info["claim"]
        params = self.claim_params()
        runs = []
        for _ in range(5):
            tx = conn.transaction()
            await tx.start()
            try:
                runs.append(await explain(conn, claim["sql"], params))
            finally:
                await tx.rollback()
        return summarise_explains(runs)

    # -- the run ----------------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        args = self.args
        self.admin = await asyncpg.connect(args.dsn)
        started = dt.datetime.now(dt.UTC)
        meta: dict[str, Any] = {
            "started": started.isoformat(timespec="seconds"),
            "uptime_start": uptime(),
            "cpus": os.cpu_count(),
            "server": dict(await self.a.fetchrow(SERVER_SQL)),
            "options": {
                k: getattr(args, k)
                for k in (
                    "parts",
                    "jobs",
                    "slots",
                    "repeat",
                    "latency",
                    "latency_parents",
                    "latency_rate",
                    "waiting",
                    "plain_jobs",
                )
            },
            "quick": args.quick,
        }
        out: dict[str, Any] = {"drains": [], "latency": [], "waiting": [], "count": {}}
        parts = set(args.parts.split(","))
        try:
            for rep in range(args.repeat):
                cases = ["plain", "fanout", "steps"]
                for case in cases[rep % 3 :] + cases[: rep % 3]:
                    if "drain" not in parts:
                        break
                    rec = await self.drain(case, rep)
                    out["drains"].append(rec)
                    log(f"repeat {rep + 1} drain {case}: {rec['rate']:,.0f} jobs/s {rec['problems']}")
                for case in ("none", "waiting") if rep % 2 == 0 else ("waiting", "none"):
                    if "waiting" not in parts:
                        break
                    rec = await self.waiting(case, rep)
                    out["waiting"].append(rec)
                    log(f"repeat {rep + 1} waiting {case}: {rec['rate']:,.0f} jobs/s {rec['problems']}")
                if "latency" in parts:
                    rec = await self.latency(rep)
                    out["latency"].append(rec)
                    log(f"repeat {rep + 1} latency: p50 {nearest_rank(rec['fan_in'], 0.5)} s")
            if "count" in parts:
                out["count"] = await self.count()
                log("statements counted")
        finally:
            await self.a.close()
        meta["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        meta["minutes"] = (dt.datetime.now(dt.UTC) - started).total_seconds() / 60
        meta["uptime_end"] = uptime()
        meta["akadze"] = {k: self.info.get(k) for k in ("version", "max_steps")}
        return {"meta": meta, **out}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        prog="python -m bench.workflows",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--quick", action="store_true", help="smoke run: small sizes, 1 repeat")
    ap.add_argument("--jobs", type=int, help="fan-out steps, and plain jobs beside them (10000; quick 1000)")
    ap.add_argument("--slots", type=int, default=50)
    ap.add_argument("--repeat", type=int, help="interleaved repeats (3; quick 1)")
    ap.add_argument("--latency", type=int, help="fan-in workflows per repeat for the delay (100; quick 20)")
    ap.add_argument("--latency-parents", type=int, default=4)
    ap.add_argument("--latency-rate", type=float, default=10.0, help="workflows (and plain jobs) a second")
    ap.add_argument("--waiting", type=int, help="waiting steps (100000; quick 10000)")
    ap.add_argument("--plain-jobs", type=int, help="plain jobs drained beside them (20000; quick 2000)")
    ap.add_argument("--parts", default="drain,waiting,latency,count", help="what to measure (default: all)")
    ap.add_argument(
        "--akadze-ref", help="measure akadze/ as committed at this git ref (default: working tree)"
    )
    ap.add_argument("--output", type=Path, help=f"Markdown file (default {DOC.relative_to(REPO_DIR)})")
    ap.add_argument("--from-json", type=Path, help="run nothing; regenerate the Markdown from a results file")
    args = ap.parse_args(argv)
    defaults = {
        "jobs": (10_000, 1_000),
        "repeat": (3, 1),
        "latency": (100, 20),
        "waiting": (100_000, 10_000),
        "plain_jobs": (20_000, 2_000),
    }
    for key, (full, quick) in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, quick if args.quick else full)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    output = args.output or (QUICK_DOC if args.quick else DOC)
    if args.from_json:
        output.write_text(markdown(json.loads(args.from_json.read_text())))
        return 0
    from bench.proc import snapshot_akadze

    stamp = time.strftime("%Y%m%d-%H%M%S")
    with tempfile.TemporaryDirectory(prefix="akadze-workflows-") as tmp:
        source = snapshot_akadze(Path(tmp), args.akadze_ref)
        bench = Bench(args, Path(tmp), BENCH_DIR / "logs" / f"workflows-{stamp}")
        log(f"akadze {source['commit']}{' (local changes)' if source['dirty'] == 'yes' else ''}; {uptime()}")
        data = asyncio.run(bench.run())
    data["meta"]["akadze_source"] = source
    results = QUICK_RESULTS if args.quick else RESULTS
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(data, indent=1) + "\n")
    output.write_text(markdown(data))
    log(f"wrote {output} and {results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
