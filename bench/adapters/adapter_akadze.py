"""akadze through its public API, run with the interpreter that runs ``python -m bench``.

``Akadze(database_url=dsn)`` with its default pool (``prepared_statements`` when the request
asks for it); ``await app.migrate()`` installs the schema;
``task.enqueue(i=...)`` and ``task.enqueue_many([...])``. Worker: ``Worker(app, slots=c)``;
``run(burst=True)`` for the drain (returns once no ready job is left), ``run()`` and
``stop()`` (graceful) for the latency step.

With ``observe`` (the akadze_obs peers): OpenTelemetry tracing on in every process, and in the
worker the Prometheus endpoint, scraped once a second; ``observe="metrics"`` (akadze_metrics)
or ``"tracing"`` (akadze_tracing) turns one of them on alone. Tracing is what a production
process runs: the SDK's TracerProvider with ``sample`` as its sampler's ratio at the root
(``ParentBased(TraceIdRatioBased(sample))``: akadze_obs, akadze_tracing) or its default
sampler (every trace, so every run, recorded: akadze_obs_all), a BatchSpanProcessor (spans
handed to its export thread in batches, nothing per span on the event loop) and an exporter
that drops what it gets (the cost of the spans, not of a network) and counts the consumer
spans it got (the worker's result says how many runs were recorded: ``spans``).

With ``cli`` (the akadze_cli peer), the drain's worker is the ``akadze worker`` command
(``akadze.cli.main`` with ``__main__:cli_app --burst --slots c``, in a thread, since the command
runs its own event loop): its peak RSS holds what the command line imports (issue 19.7).

With ``flow`` (issue 14): ``unique`` declares the task with ``Unique(args=["i"])``, ``limit`` with a limit
that never binds, ``keyed`` with concurrency 1 per value of ``k`` (job i has k = i % 100).
"""

from __future__ import annotations

import asyncio
import threading
import time
import urllib.request
from typing import Any

import asyncpg
from benchproto import Control, Recorder, emit, paced_producer, run, timed_batches, timed_single

import akadze
from akadze import Akadze
from akadze.worker import Worker

_recorder: Recorder | None = None
#: a traced peer's drain preload enqueues in calls of this many jobs: each call is one
#: producer span, so one draw of the sampler for all its jobs. 200 draws for 20,000 jobs keep
#: the share of runs recorded near the sampler's ratio in every repeat (20 calls of 1,000
#: recorded anywhere from 0 to a quarter of the runs: docs/performance.md)
TRACED_PRELOAD_BATCH = 100
#: the keyed configuration (akadze_keyed): job i has k = i % KEYS
KEYS = 100


def _traced(req: dict[str, Any]) -> bool:
    return req.get("observe") in (True, "tracing")


def _metered(req: dict[str, Any]) -> bool:
    return req.get("observe") in (True, "metrics")


def _observe(req: dict[str, Any]) -> None:
    """Tracing on for this process (akadze_obs, akadze_obs_all, akadze_tracing), once."""
    if not _traced(req) or _observed:
        return
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
    from opentelemetry.trace import SpanKind

    class Discard(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            _consumer_spans[0] += sum(1 for span in spans if span.kind is SpanKind.CONSUMER)
            return SpanExportResult.SUCCESS

    sample = req.get("sample")
    sampler = ParentBased(TraceIdRatioBased(float(sample))) if sample is not None else None
    provider = TracerProvider(sampler=sampler) if sampler is not None else TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    from akadze.events import tracing

    tracing.enable(provider)
    _observed.append(provider)


_observed: list[Any] = []
#: consumer spans exported in this process (the runs recorded)
_consumer_spans = [0]


def _scrape_every_second(port: int, stop: threading.Event) -> None:
    while not stop.wait(1.0):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            response.read()


def _app(req: dict[str, Any]) -> tuple[Akadze, Any]:
    _observe(req)
    app = Akadze(database_url=req["dsn"], prepared_statements=bool(req.get("prepared_statements")))
    flow = req.get("flow")
    options: dict[str, Any] = {}
    if flow == "unique":
        options["unique"] = akadze.Unique(args=["i"])
    elif flow == "limit":
        options["limit"] = akadze.Limit(concurrency=1_000_000)
    elif flow == "keyed":
        options["limit"] = akadze.Limit(concurrency=1, key="k")

    @app.task("bench.noop", queue="default", **options)
    async def noop(i: int, t: float | None = None, k: int | None = None) -> None:
        assert _recorder is not None
        _recorder.job({"i": i, "t": t})

    return app, noop


def info() -> dict[str, Any]:
    return {"library": "akadze", "version": getattr(akadze, "__version__", "?")}


async def install(req: dict[str, Any]) -> dict[str, Any]:
    app, _ = _app(req)
    try:
        await app.migrate()
    finally:
        await app.dispose()
    return {}


async def unfinished(req: dict[str, Any]) -> dict[str, Any]:
    conn = await asyncpg.connect(req["dsn"])
    try:
        n = await conn.fetchval("SELECT count(*) FROM akadze_jobs WHERE state IN ('queued', 'running')")
    finally:
        await conn.close()
    return {"unfinished": n}


async def _connected(app: Akadze) -> None:
    """Open the app's first connection before the timer starts, as the other adapters connect
    before theirs: the enqueue steps time enqueues, not a connection's set-up (the engine's
    first connect also asks the server for its settings)."""
    async with app.engine.connect():
        pass


async def enqueue_single(req: dict[str, Any]) -> dict[str, Any]:
    app, noop = _app(req)
    try:
        await _connected(app)
        if req.get("flow") == "keyed":
            return await timed_single(lambda i: noop.enqueue(i=i, k=i % KEYS), req["jobs"])
        return await timed_single(lambda i: noop.enqueue(i=i), req["jobs"])
    finally:
        await app.dispose()


async def enqueue_batch(req: dict[str, Any]) -> dict[str, Any]:
    app, noop = _app(req)
    try:
        await _connected(app)
        if req.get("flow") == "keyed":
            return await timed_batches(
                lambda ids: noop.enqueue_many([{"i": i, "k": i % KEYS} for i in ids]),
                req["jobs"],
                req["batch"],
            )
        batch = req["batch"]
        if req.get("preload") and _traced(req):
            batch = min(batch, TRACED_PRELOAD_BATCH)
        return await timed_batches(lambda ids: noop.enqueue_many([{"i": i} for i in ids]), req["jobs"], batch)
    finally:
        await app.dispose()


async def produce(req: dict[str, Any]) -> dict[str, Any]:
    app, noop = _app(req)
    try:
        return await paced_producer(lambda a: noop.enqueue(**a), req["jobs"], req["rate"])
    finally:
        await app.dispose()


#: the app the ``akadze worker __main__:cli_app`` command loads (the akadze_cli peer)
cli_app: Akadze | None = None


def _cli_worker(slots: int) -> None:
    """``akadze worker __main__:cli_app --burst --slots N``, as the console script runs it."""
    import sys

    from akadze.cli import main

    sys.argv = ["akadze", "worker", "__main__:cli_app", "--burst", "--slots", str(slots)]
    try:
        main()
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise RuntimeError(f"akadze worker exited {exc.code}") from None


async def worker(req: dict[str, Any]) -> dict[str, Any]:
    global _recorder, cli_app
    control = Control()
    rec = _recorder = Recorder(req["expect"])
    app, _ = _app(req)
    if req.get("cli") and req["mode"] == "drain":
        cli_app = app
        emit("ready")
        await asyncio.to_thread(_cli_worker, int(req["slots"]))
        return rec.summary(time.perf_counter())
    w = Worker(app, queues=None, slots=int(req["slots"]))
    scraping = threading.Event()
    if _metered(req):
        from prometheus_client import CollectorRegistry

        from akadze.events.metrics import serve_worker_metrics

        metrics = serve_worker_metrics(w, port=0, registry=CollectorRegistry())
        threading.Thread(target=_scrape_every_second, args=(metrics.port, scraping), daemon=True).start()
    try:
        emit("ready")
        if req["mode"] == "drain":
            run_task = asyncio.create_task(w.run(burst=True))
            stop_wait = asyncio.ensure_future(control.stop.wait())
            await asyncio.wait({run_task, stop_wait}, return_when="FIRST_COMPLETED")
        else:
            run_task = asyncio.create_task(w.run())
            done_wait = asyncio.ensure_future(rec.done.wait())
            stop_wait = asyncio.ensure_future(control.stop.wait())
            await asyncio.wait({run_task, done_wait, stop_wait}, return_when="FIRST_COMPLETED")
        if not run_task.done():
            w.stop()
        await run_task
        returned = time.perf_counter()
    finally:
        scraping.set()
        await app.dispose()
    summary = rec.summary(returned)
    if _observed:
        _observed[0].force_flush()
        summary["spans"] = _consumer_spans[0]
    return summary


if __name__ == "__main__":
    run(
        {
            "install": install,
            "unfinished": unfinished,
            "enqueue_single": enqueue_single,
            "enqueue_batch": enqueue_batch,
            "produce": produce,
            "worker": worker,
        },
        info,
    )
