"""Prometheus metrics (``pip install 'akadze[prometheus]'``): runs and waits from the events
seam, queue depths from one cached query, slots from the worker, enqueues per task.

prometheus_client is imported here only, when a function of this module is called: the
worker's import path never loads it. Labels are task and queue names and fixed words, never
argument values. Metric names and meanings: docs/operations.md.
"""

from __future__ import annotations

import asyncio
import bisect
import concurrent.futures
import functools
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from akadze.errors import ConfigError
from akadze.events import Event, Kind, metrics_http, observe, step_metrics

if TYPE_CHECKING:
    from akadze.app import Akadze
    from akadze.db.queries import NewJobs
    from akadze.db.stats import QueueStats
    from akadze.job import Job
    from akadze.outcomes import Verdict
    from akadze.worker import Worker

logger = logging.getLogger("akadze.events.metrics")

#: seconds a run takes: from 1 ms to 10 minutes
RUN_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600)
#: seconds a job waits from its run_at to its start: from 5 ms to an hour
WAIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)
#: the queue gauges' query runs at most this often per worker, whatever the scrape rate
QUEUE_INTERVAL_S = 5.0
#: ... and at most this many times as long as its last read took (a deep backlog costs more)
COST_FACTOR = 100.0
#: a scrape waits this long for that query, then shows the last values read
QUEUE_TIMEOUT_S = 2.0


def _client() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise ConfigError("metrics need prometheus-client: pip install 'akadze[prometheus]'") from None
    return prometheus_client


class _Series:
    """One (task, queue)'s tally: runs per outcome, then per-bucket counts of the durations and
    of the waits (the last bucket past every bound), each followed by the sum of the values."""

    __slots__ = ("created", "durations", "runs", "waits")

    def __init__(self) -> None:
        self.runs: dict[Verdict, int] = {}
        self.created: dict[Verdict, float] = {}
        self.durations = [0.0] * (len(RUN_BUCKETS) + 2)
        self.waits = [0.0] * (len(WAIT_BUCKETS) + 2)


class RunMetrics:
    """``akadze_runs_total``, ``akadze_run_duration_seconds`` and ``akadze_job_wait_seconds``:
    a tally of an app's events (taken in the publishing thread, as the transition publishes)
    in plain counters, and a collector that reads them at scrape time.

    The events of one publication (a claim's, an outcome batch's) are counted under one hold
    of one lock, a ``bisect`` and a few additions each (prometheus_client's histogram took two
    locks and a loop over the bounds per value: docs/performance.md).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: (task, queue) -> its tally
        self._series: dict[tuple[str, str], _Series] = {}

    def __call__(self, events: Sequence[Event]) -> None:
        claims = bool(events) and events[0].kind is Kind.CLAIMED  # a publication is of one kind
        task = queue = None
        with self._lock:
            for event in events:
                if event.task != task or event.queue != queue:
                    task, queue = event.task, event.queue
                    series = self._series.get((task, queue)) or self._new(event)
                if claims:
                    wait = event.wait_s
                    if wait is not None:
                        waits = series.waits
                        waits[bisect.bisect_left(WAIT_BUCKETS, wait)] += 1
                        waits[-1] += wait if wait > 0.0 else 0.0
                    continue
                outcome = event.outcome
                if outcome is None:
                    continue  # a cancel before any run, a requeue, a schedule fire: not a run
                runs = series.runs
                if outcome not in runs:
                    series.created[outcome] = time.time()
                runs[outcome] = runs.get(outcome, 0) + 1
                duration = event.duration_s
                if duration is not None:
                    durations = series.durations
                    durations[bisect.bisect_left(RUN_BUCKETS, duration)] += 1
                    durations[-1] += duration

    def _new(self, event: Event) -> _Series:
        series = self._series[event.task, event.queue] = _Series()
        return series

    def describe(self) -> Iterator[Any]:
        """Nothing: prometheus_client then registers the collector without calling collect() first."""
        return iter(())  # registered without a first read

    def collect(self) -> Iterator[Any]:
        """The run counters and the two histograms, from a copy of the tallies taken under the lock
        (a scrape never holds it while it builds the families)."""
        from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

        runs: dict[tuple[str, str, str], int] = {}
        created: dict[tuple[str, str, str], float] = {}
        durations: dict[tuple[str, str], list[float]] = {}
        waits: dict[tuple[str, str], list[float]] = {}
        with self._lock:
            for pair, series in self._series.items():
                for outcome, count in series.runs.items():
                    runs[(*pair, outcome.value)] = count
                    created[(*pair, outcome.value)] = series.created[outcome]
                if any(series.durations):
                    durations[pair] = list(series.durations)
                if any(series.waits):
                    waits[pair] = list(series.waits)
        family = CounterMetricFamily(
            "akadze_runs",
            "Runs ended, by how they ended for the job (succeeded, failed, cancelled, retried, "
            "snoozed, lost, released).",
            labels=["task", "queue", "outcome"],
        )
        for key, count in sorted(runs.items()):
            family.add_metric(list(key), count, created=created.get(key))
        yield family
        for name, help_text, bounds, values in (
            (
                "akadze_run_duration_seconds",
                "How long runs took, from claim to their outcome written.",
                RUN_BUCKETS,
                durations,
            ),
            (
                "akadze_job_wait_seconds",
                "How long jobs waited to start, from their run_at to their claim (database clock).",
                WAIT_BUCKETS,
                waits,
            ),
        ):
            histogram = HistogramMetricFamily(name, help_text, labels=["task", "queue"])
            # the bounds as prometheus_client writes them ("0.005", "1.0"), then the last bucket
            les = [repr(float(bound)) for bound in bounds] + ["+Inf"]
            for labels, counts in sorted(values.items()):
                cumulative = list(itertools.accumulate(counts[:-1]))
                histogram.add_metric(list(labels), list(zip(les, cumulative, strict=True)), counts[-1])
            yield histogram


#: the events the run metrics take: claims (the wait) and every end of a run
RUN_KINDS = (Kind.CLAIMED, Kind.ENDED, Kind.COMMITTED, Kind.RESCUED)


def instrument(app: Akadze, registry: Any = None) -> Callable[[], None]:
    """Count the runs this process ends (a worker, or ``akadze.testing.drain``) in ``registry``
    (prometheus_client's default one when None). Returns the function that stops counting
    (the metrics stay registered, with what they counted)."""
    client = _client()
    metrics, registry = RunMetrics(), registry if registry is not None else client.REGISTRY
    registry.register(metrics)
    undo = (app.events.tally(metrics, kinds=RUN_KINDS), step_metrics.instrument(app, registry))

    def stop() -> None:
        for each in undo:
            each()

    return stop


class EnqueueMetrics:
    """``akadze_jobs_enqueued_total{task,queue}``: jobs inserted by this process (an enqueue in
    a caller's transaction counts when the insert runs, whether or not that transaction commits)."""

    def __init__(self, registry: Any) -> None:
        client = _client()
        self.enqueued = client.Counter(
            "akadze_jobs_enqueued",
            "Jobs inserted by this process, per task and queue.",
            ["task", "queue"],
            registry=registry,
        )
        self.failed = client.Counter(
            "akadze_enqueue_errors",
            "Enqueue calls that raised (nothing inserted), per task and queue.",
            ["task", "queue"],
            registry=registry,
        )

    def __call__(self, new: NewJobs, count: int) -> _Counted:
        return _Counted(self, new, count)


class _Counted:
    __slots__ = ("count", "metrics", "new")

    def __init__(self, metrics: EnqueueMetrics, new: NewJobs, count: int) -> None:
        self.metrics = metrics
        self.new = new
        self.count = count

    def done(self, jobs: Sequence[Job] | None, error: BaseException | None) -> None:
        if jobs is not None:
            self.metrics.enqueued.labels(self.new.task, self.new.queue).inc(len(jobs))
        else:
            self.metrics.failed.labels(self.new.task, self.new.queue).inc()


def instrument_enqueue(registry: Any = None) -> Callable[[], None]:
    """Count every enqueue of this process (the app's tasks and generated clients alike) in
    ``registry``: for a producer service exposing its own metrics. Returns the undo function.

    Example::

        from prometheus_client import CollectorRegistry
        import akadze.events.metrics

        registry = CollectorRegistry()
        akadze.events.metrics.instrument_enqueue(registry)
    """
    client = _client()
    return observe.watch_enqueue(EnqueueMetrics(registry if registry is not None else client.REGISTRY))


class QueueCollector:
    """``akadze_queue_jobs{queue,state}`` and friends, read by ``queue_stats`` when a scrape
    finds the last read older than ``interval_s``, or than ``COST_FACTOR`` times what that
    read took (the query counts queued rows: ~20 ms at 20,000 of them, ~1 s at 1,000,000, so
    a deep backlog is read less often). A scrape waits up to QUEUE_TIMEOUT_S for a read it
    started; a slower read finishes in the background and the next scrape shows it."""

    def __init__(
        self,
        start_read: Callable[[], concurrent.futures.Future[Sequence[QueueStats]]],
        *,
        interval_s: float = QUEUE_INTERVAL_S,
    ) -> None:
        self.start_read = start_read
        self.interval_s = interval_s
        self.cost_factor = COST_FACTOR
        #: reads completed
        self.reads = 0
        #: how long the last read took, in seconds
        self.last_read_s = 0.0
        # reentrant: a read that is already done runs its callback in the thread that adds it
        self._lock = threading.RLock()
        self._at = float("-inf")
        self._pending: concurrent.futures.Future[Sequence[QueueStats]] | None = None
        self._stats: Sequence[QueueStats] = ()

    def stats(self) -> Sequence[QueueStats]:
        """The last queue stats read, after starting a new read when one is due and waiting up to
        QUEUE_TIMEOUT_S for it; a failed or slow read leaves the previous values in place."""
        with self._lock:
            now = time.monotonic()
            due = now - self._at >= max(self.interval_s, self.cost_factor * self.last_read_s)
            if due and self._pending is None:
                self._at = now
                try:
                    started = self._pending = self.start_read()
                except Exception as exc:
                    self._failed(exc)
                    return self._stats
                started.add_done_callback(functools.partial(self._finished, began=now))
            pending = self._pending
        if pending is not None:
            concurrent.futures.wait([pending], timeout=QUEUE_TIMEOUT_S)
        return self._stats

    def _finished(self, done: concurrent.futures.Future[Sequence[QueueStats]], *, began: float) -> None:
        with self._lock:
            self._pending = None
            self.last_read_s = time.monotonic() - began
            if done.cancelled():
                return
            error = done.exception()
            if error is not None:
                self._failed(error)
                return
            self._stats = done.result()
            self.reads += 1

    @staticmethod
    def _failed(error: BaseException) -> None:
        logger.warning("queue metrics not read (%s); showing the last values", type(error).__name__)

    def describe(self) -> Iterator[Any]:
        """Nothing: registering the collector must not run the queue query."""
        return iter(())  # registered without a first read

    def collect(self) -> Iterator[Any]:
        """The queue gauges (jobs by state, the oldest ready wait, workers, paused) from ``stats()``."""
        from prometheus_client.core import GaugeMetricFamily

        stats = self.stats()
        jobs = GaugeMetricFamily(
            "akadze_queue_jobs",
            "Jobs per queue now: ready, delayed (waiting for run_at), running.",
            labels=["queue", "state"],
        )
        oldest = GaugeMetricFamily(
            "akadze_queue_oldest_ready_seconds",
            "How long the oldest ready job of the queue has waited (0 when none is ready).",
            labels=["queue"],
        )
        workers = GaugeMetricFamily(
            "akadze_queue_workers", "Live workers serving the queue.", labels=["queue"]
        )
        paused = GaugeMetricFamily("akadze_queue_paused", "1 when the queue is paused.", labels=["queue"])
        for queue in stats:
            jobs.add_metric([queue.name, "ready"], queue.ready)
            jobs.add_metric([queue.name, "delayed"], queue.delayed)
            jobs.add_metric([queue.name, "running"], queue.running)
            oldest.add_metric([queue.name], queue.oldest_ready_s or 0.0)
            workers.add_metric([queue.name], queue.workers)
            paused.add_metric([queue.name], 1.0 if queue.paused else 0.0)
        yield from (jobs, oldest, workers, paused)


def serve_worker_metrics(
    worker: Worker,
    *,
    port: int,
    host: str = "127.0.0.1",
    registry: Any = None,
    queue_interval_s: float = QUEUE_INTERVAL_S,
) -> metrics_http.MetricsServer:
    """Serve ``worker``'s metrics at ``http://host:port/metrics`` (port 0: any free port).

    Call it on the worker's event loop, before or while it runs: the queue gauges' query runs
    there, on the app's read engine (its replica, with read_database_url). The address is bound
    at once, but ``/metrics`` answers 503 until the worker serves (schema checked, registered,
    SIGTERM taken as a graceful stop) and again once it has returned. Raises ConfigError when
    prometheus-client is missing or the address cannot be bound.
    """
    client = _client()
    registry = registry if registry is not None else client.REGISTRY
    loop = asyncio.get_running_loop()
    undo = [instrument(worker.app, registry), instrument_enqueue(registry)]
    slots = client.Gauge(
        "akadze_worker_slots", "This worker's slots, busy or free.", ["state"], registry=registry
    )
    slots.labels("busy").set_function(lambda: len(worker._running))
    slots.labels("free").set_function(lambda: worker.slots - len(worker._running))
    dropped = client.Gauge(
        "akadze_events_dropped",
        "Events dropped because a subscriber was slower than the transitions.",
        registry=registry,
    )
    dropped.set_function(lambda: worker.events.dropped)
    queues = QueueCollector(lambda: _queue_stats(worker, loop), interval_s=queue_interval_s)
    registry.register(queues)
    try:
        server, thread = metrics_http.start(
            client.make_wsgi_app(registry), host, port, serving=lambda: worker.serving
        )
    except OSError as exc:
        for step in undo:
            step()
        raise ConfigError(f"cannot serve metrics on {host}:{port} ({exc.strerror or exc})") from None
    logger.info("metrics at http://%s:%d/metrics", host, server.server_port)
    return metrics_http.MetricsServer(server, thread, queues, undo)


def _queue_stats(
    worker: Worker, loop: asyncio.AbstractEventLoop
) -> concurrent.futures.Future[Sequence[QueueStats]]:
    """Starts the read on the worker's loop, on the app's read engine (from a scrape's thread)."""
    from akadze.db.queries import Queries

    async def read() -> Sequence[QueueStats]:
        async with worker.app.read_engine.connect() as conn:
            return await Queries.queue_stats(conn, worker.queues)

    return asyncio.run_coroutine_threadsafe(read(), loop)
