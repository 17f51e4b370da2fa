"""The TypeScript client's enqueue (issue 31): Node, one by one and in batches, beside a raw ``pg``
insert of the same rows (prepared, and waking workers as bench/adapters/adapter_raw.py's raw
peer does: a pg_notify per job, a NOTIFY per batch), and the Python client's figures in the same
run.

    flock /tmp/akadze-bench.lock .venv/bin/python -m bench.node_enqueue [--dsn DSN] [--jobs N] [--repeat R]

The Node side is bench/node/enqueue.js over examples/node_producer (its generated clients of
``mail.send``, built with tsc): steps interleaved per repeat, on one connection each, the table
truncated before every step. Prints medians (jobs/s) and the ratios to raw pg.
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


async def _python_client(url: str, jobs: int, batch: int, repeat: int) -> dict[str, list[float]]:
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
            for b in range(0, jobs * 4, batch):
                await mail.mail_send.enqueue_many([args(b + i) for i in range(batch)])  # type: ignore[misc]
            results["python_client_batch"].append(jobs * 4 / (time.perf_counter() - start))
    finally:
        await akadze.client.dispose()
        await engine.dispose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--jobs", type=int, default=5000, help="jobs one by one (batches: 4x that)")
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    url = asyncio.run(_database(options.dsn, "bench_node"))
    subprocess.run(
        ["node", str(NODE_PROJECT / "node_modules" / "typescript" / "bin" / "tsc"), "-p", "tsconfig.json"],
        cwd=NODE_PROJECT,
        check=True,
    )
    node = subprocess.run(
        [
            "node",
            str(ROOT / "bench" / "node" / "enqueue.js"),
            str(NODE_PROJECT / "dist"),
            url,
            str(options.jobs),
            str(options.batch),
            str(options.repeat),
        ],
        cwd=NODE_PROJECT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "NODE_PATH": str(NODE_PROJECT / "node_modules")},
    )
    results: dict[str, list[float]] = json.loads(node.stdout)
    results |= asyncio.run(_python_client(url, options.jobs, options.batch, options.repeat))
    median = {name: statistics.median(values) for name, values in results.items()}
    batches = f"in batches of {options.batch}: {options.jobs * 4}"
    print(f"jobs one by one: {options.jobs}, {batches}; repeats: {options.repeat}")
    print(f"{'step':<24}{'median jobs/s':>14}  {'min-max':>20}")
    for name, values in results.items():
        print(f"{name:<24}{median[name]:>14,.0f}  {min(values):>9,.0f}-{max(values):<10,.0f}")
    print(f"Node client one by one / raw pg: {median['client_single'] / median['raw_single']:.2f}x")
    print(f"Node client batches / raw pg:    {median['client_batch'] / median['raw_batch']:.2f}x")


if __name__ == "__main__":
    main()
