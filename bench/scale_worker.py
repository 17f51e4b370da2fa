"""One worker process of ``python -m bench.scale`` (run as a script; imports nothing from bench).

    python bench/scale_worker.py '<JSON request>'

The request: ``dsn``, ``slots``, ``task_us`` (CPU each run spends, on the thread's clock;
0 or absent: a no-op), ``mode`` (``burst``: ``Worker.run(burst=True)``, returning once
no ready job is left; ``serve``: ``Worker.run()`` with every service, stopped gracefully once
``expect`` jobs have started), ``prune`` (null: no pruner; or ``retention_s`` and
``interval_s``: the app's retention and a pruner pass that often, the first at once) and
``trends`` (null or absent: no trends rollup; or ``interval_s`` and ``settle_s``: the rollup
service with those, its first pass at once). The
task is a no-op that records ``time.perf_counter()`` (CLOCK_MONOTONIC, one clock for every
process of the host). Lines on stdout: ``{"event": "ready"}`` once the worker is built, then
after a ``go`` line on stdin the run, then ``{"event": "result", ...}``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import resource
import sys
import time
from datetime import timedelta
from typing import Any


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


async def run(req: dict[str, Any]) -> dict[str, Any]:
    from akadze import Akadze
    from akadze.worker import Worker
    from akadze.worker.pruner import pruner_service

    prune = req.get("prune")
    options: dict[str, Any] = {}
    if prune:
        options["retention"] = timedelta(seconds=prune["retention_s"])
        options["grace"] = timedelta(seconds=prune["retention_s"] / 2)
    app = Akadze(database_url=req["dsn"], **options)
    starts: list[float] = []
    expect = int(req.get("expect") or 0)
    #: CPU seconds each run spends before it returns (0: a no-op)
    work_s = float(req.get("task_us") or 0) / 1e6
    enough = asyncio.Event()

    @app.task("bench.noop", queue="default")
    async def noop(i: int) -> None:
        starts.append(time.perf_counter())
        if work_s:
            until = time.thread_time() + work_s
            while time.thread_time() < until:
                pass
        if expect and len(starts) >= expect:
            enough.set()

    worker = Worker(app, slots=int(req["slots"]))
    worker.services = [s for s in worker.services if getattr(s, "__name__", "") not in ("pruner", "trends")]
    if prune:
        worker.services.append(pruner_service(interval_s=prune["interval_s"], first_delay_s=0.0))
    trends = req.get("trends")
    rolling: list[float] = []
    #: the server CPU (seconds) of the rollup's backend over each pass
    rolling_cpu: list[float] = []
    if trends:
        from sqlalchemy import text
        from sqlalchemy.ext.asyncio import create_async_engine

        import akadze.worker.trends as trends_module
        from akadze.worker.trends import trends_service

        roll_up = trends_module.roll_up
        # the rollup runs on a connection of its own, whose server process is known: its CPU
        # time is read from /proc before and after each pass (the server is on this machine)
        own = create_async_engine(app.engine.url, pool_size=1, max_overflow=0)
        async with own.connect() as conn:
            backend = int((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())

        def backend_cpu() -> float:
            with open(f"/proc/{backend}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        async def timed_roll_up(engine: Any, **kwargs: Any) -> Any:
            # the service calls the module's roll_up by name: each pass's wall time and its
            # backend's CPU time are recorded
            started, cpu = time.perf_counter(), backend_cpu()
            try:
                return await roll_up(own, **kwargs)
            finally:
                rolling.append(time.perf_counter() - started)
                rolling_cpu.append(backend_cpu() - cpu)

        trends_module.roll_up = timed_roll_up  # type: ignore[assignment]
        worker.services.append(
            trends_service(interval_s=trends["interval_s"], settle_s=trends["settle_s"], first_delay_s=0.0)
        )
    emit("ready")
    await asyncio.to_thread(sys.stdin.readline)
    cpu_at_go = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
    try:
        if req["mode"] == "burst":
            await worker.run(burst=True)
        else:
            running = asyncio.create_task(worker.run())
            await enough.wait()
            worker.stop()
            await running
    finally:
        await app.dispose()
    n = len(starts)
    tenths = []
    if n >= 11:
        edges = [starts[round(k * (n - 1) / 10)] for k in range(11)]
        tenths = [((n - 1) / 10) / (b - a) if b > a else None for a, b in itertools.pairwise(edges)]
    return {
        "started": n,
        "first": starts[0] if starts else None,
        "last": starts[-1] if starts else None,
        "tenths": tenths,
        "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        # from the go to the end: not the imports and set-up before it
        "cpu_s": sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) - cpu_at_go,
        # the trends rollup's passes: how many, and their wall time (the server's work, mostly)
        "rollup_passes": len(rolling),
        "rollup_s": sum(rolling),
        "rollup_cpu_s": sum(rolling_cpu),
    }


def cli_app() -> Any:
    """``akadze worker scale_worker:cli_app`` (``bench.scale cli_rss``): the no-op task on
    AKADZE_DATABASE_URL, for the command line's own worker."""
    from akadze import Akadze

    app = Akadze(database_url=os.environ["AKADZE_DATABASE_URL"])

    @app.task("bench.noop", queue="default")
    async def noop(i: int) -> None: ...

    return app


def main() -> None:
    try:
        emit("result", **asyncio.run(run(json.loads(sys.argv[1]))))
    except BaseException as exc:
        emit("error", error=f"{type(exc).__name__}: {exc}")
        raise


if __name__ == "__main__":
    main()
