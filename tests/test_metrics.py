"""Prometheus metrics: a real worker's endpoint scraped over HTTP, the producer's enqueue
counters, and no prometheus_client on the worker's import path unless enabled."""

from __future__ import annotations

import asyncio
import concurrent.futures
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from datetime import timedelta

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from akadze import Akadze, Fail, Retry, current
from akadze.db.stats import QueueStats
from akadze.errors import ConfigError
from akadze.events import metrics
from akadze.events.metrics import QueueCollector, instrument_enqueue, serve_worker_metrics
from akadze.worker import Worker
from tests.conftest import wait_until
from tests.support import module_database


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    return module_database(request, server_url, template_db)


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


async def scrape(port: int) -> str:
    def get() -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/plain")
            return str(response.read().decode())

    return await asyncio.to_thread(get)


def value(found: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_a_serving_worker_exposes_the_design_metrics_over_http(app: Akadze) -> None:
    release = asyncio.Event()

    @app.task("mail.send", queue="mail")
    async def send(secret: str) -> None:
        if secret == "SECRET-SLOW":
            await release.wait()

    @app.task("report.build", queue="mail", max_attempts=2)
    async def build(secret: str) -> None:
        if current().job.attempt == 1:
            raise Retry(timedelta(0))
        raise Fail("no")

    # a delayed job and a ready one in a queue this worker does not serve
    await send.using(delay=timedelta(hours=1)).enqueue(secret="later")
    await send.using(queue="elsewhere").enqueue(secret="x")
    registry = CollectorRegistry()
    worker = Worker(app, queues=["mail"], slots=3, poll_interval=timedelta(milliseconds=50))
    server = serve_worker_metrics(worker, port=0, registry=registry, queue_interval_s=0.0)
    server.queues.cost_factor = 0.0  # read at every scrape
    running = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await wait_until(lambda: worker.serving, timeout=30)  # /metrics answers 503 until then
        ok = await send.enqueue(secret="SECRET-VALUE-1")
        await build.enqueue(secret="SECRET-VALUE-2")
        await send.enqueue(secret="SECRET-SLOW")

        async def counted() -> bool:
            found = samples(await scrape(server.port))
            return (
                value(found, "akadze_runs_total", task="report.build", queue="mail", outcome="failed") == 1
                and value(found, "akadze_runs_total", task="mail.send", queue="mail", outcome="succeeded")
                == 1
            )

        await wait_until(counted, timeout=20)
        text = await scrape(server.port)
        found = samples(text)
        assert "SECRET" not in text
        assert value(found, "akadze_runs_total", task="report.build", queue="mail", outcome="retried") == 1
        assert value(found, "akadze_run_duration_seconds_count", task="mail.send", queue="mail") == 1
        assert value(found, "akadze_job_wait_seconds_count", task="report.build", queue="mail") == 2
        assert value(found, "akadze_job_wait_seconds_count", task="mail.send", queue="mail") == 2
        assert value(found, "akadze_jobs_enqueued_total", task="mail.send", queue="mail") == 2
        # one job runs (the slow one): slots and queue gauges
        assert value(found, "akadze_worker_slots", state="busy") == 1
        assert value(found, "akadze_worker_slots", state="free") == 2
        assert value(found, "akadze_queue_jobs", queue="mail", state="running") == 1
        assert value(found, "akadze_queue_jobs", queue="mail", state="delayed") == 1
        assert value(found, "akadze_queue_jobs", queue="mail", state="ready") == 0
        assert value(found, "akadze_queue_jobs", queue="elsewhere", state="ready") == 1
        assert value(found, "akadze_queue_oldest_ready_seconds", queue="elsewhere") > 0
        assert value(found, "akadze_queue_workers", queue="mail") == 1
        assert value(found, "akadze_queue_workers", queue="elsewhere") == 0
        assert ok.id > 0
    finally:
        release.set()
        worker.stop()
        await running
        server.close()


async def test_the_queue_query_runs_at_most_once_per_interval(app: Akadze) -> None:
    @app.task("t")
    async def t() -> None:
        return None

    worker = Worker(app, listen=False)
    server = serve_worker_metrics(worker, port=0, registry=CollectorRegistry(), queue_interval_s=60.0)
    running = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await wait_until(lambda: worker.serving, timeout=30)
        for _ in range(3):
            assert "akadze_queue_jobs" in await scrape(server.port)
        assert server.queues.reads == 1
    finally:
        worker.stop()
        await running
        server.close()


async def test_a_port_in_use_is_one_config_error(app: Akadze) -> None:
    @app.task("t")
    async def t() -> None:
        return None

    worker = Worker(app, listen=False)
    first = serve_worker_metrics(worker, port=0, registry=CollectorRegistry())
    try:
        with pytest.raises(ConfigError, match=f"cannot serve metrics on 127.0.0.1:{first.port}"):
            serve_worker_metrics(worker, port=first.port, registry=CollectorRegistry())
    finally:
        first.close()


async def test_a_producer_counts_its_enqueues_in_its_own_registry(app: Akadze) -> None:
    @app.task("mail.send", queue="mail")
    async def send(user_id: int) -> None:
        return None

    registry = CollectorRegistry()
    undo = instrument_enqueue(registry)
    try:
        await send.enqueue(user_id=1)
        await send.enqueue_many([{"user_id": 2}, {"user_id": 3}])
        await send.using(queue="bulk").enqueue(user_id=4)
    finally:
        undo()
    await send.enqueue(user_id=5)  # after undo: not counted
    assert (
        registry.get_sample_value("akadze_jobs_enqueued_total", {"task": "mail.send", "queue": "mail"}) == 3
    )
    assert (
        registry.get_sample_value("akadze_jobs_enqueued_total", {"task": "mail.send", "queue": "bulk"}) == 1
    )


def test_the_worker_import_path_loads_neither_prometheus_nor_opentelemetry() -> None:
    code = (
        "import sys, akadze, akadze.worker, akadze.cli, akadze.client, akadze.events.logs;"
        "print([m for m in sys.modules if m.startswith(('prometheus_client', 'opentelemetry'))])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_a_read_slower_than_a_scrape_finishes_in_the_background(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics, "QUEUE_TIMEOUT_S", 0.05)
    pending: concurrent.futures.Future[Sequence[QueueStats]] = concurrent.futures.Future()
    started: list[int] = []

    def start_read() -> concurrent.futures.Future[Sequence[QueueStats]]:
        started.append(1)
        return pending

    collector = QueueCollector(start_read, interval_s=0.0)
    assert collector.stats() == ()  # the scrape did not wait past its timeout
    assert collector.stats() == () and len(started) == 1  # one read in flight at a time
    one = QueueStats("mail", False, 1, 2, None, 3, None, 4.0, 5)
    pending.set_result([one])
    collector.cost_factor = 1e9  # the next read is far off: the scrape shows what was read
    assert collector.stats() == [one] and len(started) == 1


async def test_akadze_worker_serves_metrics_on_the_port_it_is_given(database_url: str) -> None:
    import os
    import signal
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "AKADZE_DATABASE_URL": database_url}
    process = subprocess.Popen(
        [sys.executable, "-m", "akadze.cli", "worker", "tests.apps.basic:app", "--metrics-port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        found: dict[str, str] = {}

        async def served() -> bool:
            try:
                found["text"] = await scrape(port)
            except OSError:
                return False
            return True

        await wait_until(served, timeout=60, interval=0.2)  # a worker process starting on a loaded machine
        assert 'akadze_worker_slots{state="free"} 10.0' in found["text"]
        assert "akadze_queue_jobs" in found["text"]
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert process.returncode == 0, err
    assert f"metrics at http://127.0.0.1:{port}/metrics" in err


def test_the_run_metrics_expose_what_prometheus_clients_own_metrics_would() -> None:
    """The tally's counters and buckets, read at scrape time, against prometheus_client's
    Counter and Histogram fed the same values (a value on a bound counts in that bucket)."""
    from prometheus_client import Counter, Histogram, generate_latest

    from akadze.events import Event, Kind
    from akadze.job import JobState
    from akadze.outcomes import Verdict

    ours, theirs = CollectorRegistry(), CollectorRegistry()
    tally = metrics.RunMetrics()
    ours.register(tally)
    runs = Counter("akadze_runs", "x", ["task", "queue", "outcome"], registry=theirs)
    duration = Histogram(
        "akadze_run_duration_seconds", "x", ["task", "queue"], buckets=metrics.RUN_BUCKETS, registry=theirs
    )
    wait = Histogram(
        "akadze_job_wait_seconds", "x", ["task", "queue"], buckets=metrics.WAIT_BUCKETS, registry=theirs
    )
    values = [0.0, 0.001, 0.0011, 0.005, 0.3, 1, 2.5, 599.9, 600, 601, 3600, 5000]
    claims, ends = [], []
    for n, seconds in enumerate(values):
        task, outcome = ("a", Verdict.SUCCEEDED) if n % 3 else ("b", Verdict.RETRIED)
        claims.append(
            Event(Kind.CLAIMED, n, task, "q", JobState.QUEUED, JobState.RUNNING, 1, 1, wait_s=seconds)
        )
        ended = JobState.SUCCEEDED
        ends.append(
            Event(
                Kind.ENDED, n, task, "q", JobState.RUNNING, ended, 1, 1, outcome=outcome, duration_s=seconds
            )
        )
        runs.labels(task, "q", outcome.value).inc()
        duration.labels(task, "q").observe(seconds)
        wait.labels(task, "q").observe(seconds)
    # one publication holds the events of a claim or an outcome batch, of several tasks at once
    tally(claims[:5])
    tally(ends[:5])
    for claim, end in zip(claims[5:], ends[5:], strict=True):
        tally([claim])
        tally([end])
    # not runs: a claim without a wait, a cancel before any run
    tally([Event(Kind.CLAIMED, 99, "a", "q", JobState.QUEUED, JobState.RUNNING, 1, 1)])
    tally([Event(Kind.CANCELLED, 98, "a", "q", JobState.QUEUED, JobState.CANCELLED, 0, 0)])

    def without_created(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        found = samples(generate_latest(registry).decode())
        return {key: v for key, v in found.items() if not key[0].endswith("_created")}

    expected = without_created(theirs)
    assert value(expected, "akadze_run_duration_seconds_bucket", task="a", queue="q", le="0.001") == 1
    assert without_created(ours) == expected


def _status(port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


async def test_metrics_answer_only_while_the_worker_serves(app: Akadze) -> None:
    """Bound at once, but 503 before the worker has registered (and so takes SIGTERM as a
    graceful stop) and after it returned: a scrape that succeeds means the worker serves."""

    @app.task("t")
    async def t() -> None:
        return None

    worker = Worker(app, listen=False, poll_interval=timedelta(milliseconds=50))
    server = serve_worker_metrics(worker, port=0, registry=CollectorRegistry())
    try:
        assert await asyncio.to_thread(_status, server.port) == 503
        running = asyncio.create_task(worker.run(handle_signals=False))
        try:
            await wait_until(lambda: worker.serving, timeout=30)
            assert await asyncio.to_thread(_status, server.port) == 200
        finally:
            worker.stop()
            await running
        assert await asyncio.to_thread(_status, server.port) == 503
    finally:
        server.close()
