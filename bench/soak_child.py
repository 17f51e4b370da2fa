"""The child side of ``python -m bench.soak`` (bench/soak.py): the app the ``akadze worker
soak_child:cli_app`` processes load, the producer process, and the chart. Standard library only
at the top: the producer runs with the snapshot of akadze on PYTHONPATH, the chart with
bench/.venvs/plot's python (matplotlib), neither importing ``bench``.

    python bench/soak_child.py --producer RATE     # stdin: go, stop; stdout: JSON lines
    bench/.venvs/plot/bin/python bench/soak_child.py --plot RESULT.json OUT.png
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

#: the probe's producer keeps at most this many jobs queued
BACKLOG = 5000
QUEUED_SQL = "SELECT count(*) FROM akadze_jobs WHERE state = 'queued'"


def log(msg: str) -> None:
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- the app of the workers and the producer (the snapshot of akadze on PYTHONPATH) ---------------


def cli_app() -> Any:
    """``akadze worker soak_child:cli_app``: on AKADZE_DATABASE_URL, retention SOAK_RETENTION_S
    (grace half of it), a pool of SOAK_SLOTS + 3 connections, a task that sleeps SOAK_TASK_MS
    (so that jobs are in flight when a worker is killed)."""
    from datetime import timedelta

    from akadze import Akadze

    retention = timedelta(seconds=float(os.environ.get("SOAK_RETENTION_S", "120")))
    pool = int(os.environ.get("SOAK_SLOTS", "10")) + 3
    pause = float(os.environ.get("SOAK_TASK_MS", "0")) / 1000
    url = os.environ["AKADZE_DATABASE_URL"]
    app = Akadze(database_url=url, retention=retention, grace=retention / 2, pool_size=pool)

    @app.task("bench.noop", queue="default")
    async def noop(i: int) -> None:
        if pause:
            await asyncio.sleep(pause)

    return app


async def produce(rate: float) -> None:
    """The producer process: after ``go`` on stdin, enqueue what is due every 20 ms until ``stop``;
    a ``count`` line each second, then ``result``. Rate 0 (the probe): 500 at a time whenever
    fewer than BACKLOG jobs are queued, so that the workers never wait for work and the
    producer takes no more than it must."""
    import asyncpg

    app = cli_app()
    conn = await asyncpg.connect(os.environ["AKADZE_DATABASE_URL"])
    noop = app.tasks["bench.noop"]
    print(json.dumps({"event": "ready"}), flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    stop = asyncio.create_task(asyncio.to_thread(sys.stdin.readline))
    sent = errors = 0
    t0 = last = time.monotonic()
    while not stop.done():
        now = time.monotonic()
        if rate > 0:
            due = min(int(rate * (now - t0)) - sent, 5000)
        else:
            due = 500 if await conn.fetchval(QUEUED_SQL) < BACKLOG else 0
        if due > 0:
            try:
                await noop.enqueue_many([{"i": sent + k} for k in range(due)])
                sent += due
            except Exception as exc:  # counted and reported; the soak goes on
                errors += 1
                log(f"producer: {type(exc).__name__}")
        if now - last >= 1.0:
            last = now
            print(json.dumps({"event": "count", "sent": sent}), flush=True)
        await asyncio.sleep(0.02 if rate > 0 or not due else 0)
    await conn.close()
    await app.dispose()
    print(json.dumps({"event": "result", "sent": sent, "errors": errors}), flush=True)


# -- the chart (this file run by bench/.venvs/plot/bin/python) ----------------------------------


def plot(result_path: str, out_png: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    res = json.loads(Path(result_path).read_text())
    rows = res["soak"]["minutes"]
    x = [r["minute"] for r in rows]
    sent = [r["sent"] for r in rows]
    for r, before in zip(rows, [0, *sent], strict=False):
        r["enqueued"] = r["sent"] - before
    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    panels = [
        ("enqueue-to-start ms (log)", {"p50": "p50_ms", "p99": "p99_ms", "max": "max_ms"}, 1, True),
        ("jobs per minute", {"enqueued": "enqueued", "finished": "done"}, 1, False),
        ("dead tuples before VACUUM", {"n_dead_tup": "dead"}, 1, False),
        ("akadze_jobs MB", {"table": "table_bytes", "indexes": "index_bytes"}, 2**20, False),
        ("rows", {"queued": "queued", "running": "running", "finished": "finished_rows"}, 1, True),
    ]
    for ax, (title, series, scale, logy) in zip(axes.flat, panels, strict=False):
        for label, key in series.items():
            ax.plot(x, [(r[key] or 0) / scale for r in rows], marker=".", label=label)
        ax.set_title(title, fontsize=10)
        if logy:
            ax.set_yscale("symlog" if title == "rows" else "log")
        else:
            ax.set_ylim(bottom=0)
    ax = axes.flat[5]
    for w in range(2):
        ax.plot(x, [r["rss_mb"][w] for r in rows], marker=".", label=f"worker {w}")
    ax.set_title("worker VmRSS MB (a killed worker restarts)", fontsize=10)
    ax.set_ylim(bottom=0)
    for ax in axes.flat:
        for e in res["soak"]["events"]:
            if e["event"] == "kill":
                ax.axvline(e["t"] / 60, color="red", alpha=0.7, linewidth=1.0)
        hold = [e["t"] / 60 for e in res["soak"]["events"] if e["event"].startswith("xmin")]
        if len(hold) == 2:
            ax.axvspan(hold[0], hold[1], color="orange", alpha=0.15)
        ax.set_xlabel("minute")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(
        f"soak: {len(rows)} min at {res['soak']['rate']:,.0f} jobs/s; red: SIGKILL of a worker; "
        "orange: xmin held",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)


def rss_mb(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def markdown(res: dict[str, Any]) -> str:
    lines = [
        "| min | enqueued | done | start p50 ms | p99 ms | max ms | queued | running | finished rows "
        "| dead tuples (after VACUUM) | table MB | indexes MB | worker RSS MB | load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    prev = 0
    for r in res["minutes"]:
        after = r.get("dead_after_vacuum")
        after_text = "-" if after is None else f"{after:,}"
        lines.append(
            f"| {r['minute']} | {r['sent'] - prev:,} | {r['done']:,} | {r['p50_ms'] or 0:,.0f} "
            f"| {r['p99_ms'] or 0:,.0f} | {r['max_ms'] or 0:,.0f} | {r['queued']:,} | {r['running']:,} "
            f"| {r['finished_rows']:,} | {r['dead']:,} ({after_text}) "
            f"| {r['table_bytes'] / 2**20:,.1f} | {r['index_bytes'] / 2**20:,.1f} "
            f"| {' / '.join(f'{x or 0:.1f}' for x in r['rss_mb'])} | {r['load1']:.2f} |"
        )
        prev = r["sent"]
    return "\n".join(lines)


def main() -> None:
    if sys.argv[1] == "--producer":
        asyncio.run(produce(float(sys.argv[2])))
    else:
        plot(sys.argv[2], sys.argv[3])


if __name__ == "__main__":
    main()
