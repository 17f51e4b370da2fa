"""The TypeScript client's enqueue (issue 31): Node, one by one and in batches, beside a
hand-written ``pg`` insert of the same rows, and the Python client's figures in the same run.

    flock /tmp/akadze-bench.lock .venv/bin/python -m bench.node_enqueue [--dsn DSN] [--jobs N]
        [--batch-jobs N] [--repeat R] [--raw-forms] [--output FILE]

The Node side is bench/node/enqueue.js over examples/node_producer (its generated clients of
``mail.send``, built with tsc; what each step does is written at the top of that file): steps
interleaved per repeat, the client's and the raw step swapping places every other repeat, on
one connection, the table truncated before every step. The raw insert writes the same row
(checked before timing), is prepared, wakes workers as bench/adapters/adapter_raw.py's raw peer
does and reads the ids back in input order, as a caller needs them. Prints, per step, the median
jobs/s and its spread, Node's and the PostgreSQL backend's CPU per job (from /proc), the load
average, and the ratios client / raw of each repeat (the two steps side by side).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import asyncpg

from akadze import Akadze

ROOT = Path(__file__).resolve().parent.parent
NODE_PROJECT = ROOT / "examples" / "node_producer"


async def _database(dsn: str, name: str) -> str:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await conn.execute(f"CREATE DATABASE {name}")
    finally:
        await conn.close()
    url = dsn.rsplit("/", 1)[0] + f"/{name}"
    app = Akadze(database_url=url)
    try:
        await app.migrate()
    finally:
        await app.dispose()
    return url


async def _python_client(
    url: str, jobs: int, batch: int, batch_jobs: int, repeat: int
) -> dict[str, list[float]]:
    sys.path.insert(0, str(ROOT / "examples" / "producer"))
    from clients import mail  # the Python clients of the same task

    import akadze.client
    from akadze.app import create_engine

    engine = create_engine(url)
    akadze.client.configure(engine=engine)
    results: dict[str, list[float]] = {"python_client_single": [], "python_client_batch": []}

    def args(i: int) -> dict[str, object]:
        return {
            "to": mail.Recipient(user_id=i, email=f"user{i}@example.com", name=None),
            "template": mail.Template.WELCOME,
        }

    try:
        for _ in range(repeat):
            async with engine.begin() as conn:
                await conn.exec_driver_sql("TRUNCATE akadze_jobs")
            start = time.perf_counter()
            for i in range(jobs):
                await mail.mail_send.enqueue(**args(i))  # type: ignore[arg-type]
            results["python_client_single"].append(jobs / (time.perf_counter() - start))
            async with engine.begin() as conn:
                await conn.exec_driver_sql("TRUNCATE akadze_jobs")
            start = time.perf_counter()
            for b in range(0, batch_jobs, batch):
                await mail.mail_send.enqueue_many([args(b + i) for i in range(batch)])  # type: ignore[misc]
            results["python_client_batch"].append(batch_jobs / (time.perf_counter() - start))
    finally:
        await akadze.client.dispose()
        await engine.dispose()
    return results


def _table(results: dict[str, list[dict[str, float]]], load: list[float], options: argparse.Namespace) -> str:
    """The run's figures: medians and spreads per step, CPU per job, the paired ratios."""
    lines = [
        f"jobs one by one: {options.jobs}; in batches of {options.batch}: {options.batch_jobs}; "
        f"repeats: {options.repeat}; load average (1 min) during the run: "
        f"{min(load):.2f}-{max(load):.2f}",
        f"{'step':<28}{'median jobs/s':>14}  {'min-max':>19}  {'Node CPU us/job':>15}  {'db CPU us/job':>13}",
    ]
    for name, runs in results.items():
        rates = [r["rate"] for r in runs]
        cpu = [
            f"{statistics.median(r[k] for r in runs):>15.1f}" if k in runs[0] else f"{'':>15}"
            for k in ("node_us", "db_us")
        ]
        spread = f"{min(rates):>9,.0f}-{max(rates):<9,.0f}"
        lines.append(f"{name:<28}{statistics.median(rates):>14,.0f}  {spread}  {cpu[0]}  {cpu[1][2:]}")
    lines.append("ratios client / raw pg, per repeat (the two steps side by side), median and min-max:")
    for label, client, raw in (
        ("one by one", "client_single", "raw_single"),
        ("batches", "client_batch", "raw_batch"),
    ):
        ratios = [c["rate"] / r["rate"] for c, r in zip(results[client], results[raw], strict=True)]
        each = " ".join(f"{x:.2f}" for x in ratios)
        spread = f"{min(ratios):.2f}-{max(ratios):.2f}"
        lines.append(f"  {label:<11} {statistics.median(ratios):.2f}x  ({spread}; each: {each})")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--jobs", type=int, default=3000, help="jobs one by one")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--batch-jobs", type=int, default=30000, help="jobs in batches")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--raw-forms", action="store_true", help="also time every raw batch form")
    parser.add_argument("--output", type=Path, help="also write the table to this file")
    options = parser.parse_args()
    options.batch_jobs = -(-options.batch_jobs // options.batch) * options.batch
    url = asyncio.run(_database(options.dsn, "bench_node"))
    subprocess.run(
        ["node", str(NODE_PROJECT / "node_modules" / "typescript" / "bin" / "tsc"), "-p", "tsconfig.json"],
        cwd=NODE_PROJECT,
        check=True,
    )
    env = {**os.environ, "NODE_PATH": str(NODE_PROJECT / "node_modules")}
    if options.raw_forms:
        env["RAW_FORMS"] = "1"
    node = subprocess.run(
        [
            "node",
            str(ROOT / "bench" / "node" / "enqueue.js"),
            str(NODE_PROJECT / "dist"),
            url,
            str(options.jobs),
            str(options.batch),
            str(options.batch_jobs),
            str(options.repeat),
        ],
        cwd=NODE_PROJECT,
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    out = json.loads(node.stdout)
    results: dict[str, list[dict[str, float]]] = out["results"]
    load: list[float] = out["load"]
    python = asyncio.run(_python_client(url, options.jobs, options.batch, options.batch_jobs, options.repeat))
    results |= {name: [{"rate": rate} for rate in rates] for name, rates in python.items()}
    load.append(os.getloadavg()[0])
    table = _table(results, load, options)
    print(table)
    if options.output:
        options.output.write_text(table + "\n")


if __name__ == "__main__":
    main()
