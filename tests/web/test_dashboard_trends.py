"""The trends against the real database: the workers' rollup counts every finished job once, per
minute, queue, task and final state, with run-time histograms whose percentiles hold within a
bucket; hours are the sums of their minutes; a minute waits until it has settled; one worker
rolls up at a time; old rows go; and the page shows what the table holds."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from akadze import Akadze
from akadze.db.locks import ROLLUP
from akadze.db.trends import PER_DOUBLING, TOP_BUCKET, bucket_of, percentile
from akadze.web import create_app
from akadze.worker import Worker
from akadze.worker.trends import roll_up
from tests.support import execute, fetch, fetchval, module_database, plain
from tests.web.conftest import client_for


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


#: the jobs the tests roll up: finished over the last few hours, some runs long
_FINISHED = """
INSERT INTO akadze_jobs (task, queue, state, attempt, run, args, created_at, run_at, started_at, finished_at)
SELECT
    (ARRAY['mail.send', 'report.build', 'mail.send'])[1 + n % 3],
    (ARRAY['mail', 'reports', 'bulk'])[1 + n % 3],
    CASE WHEN n % 7 = 0 THEN 'failed' WHEN n % 11 = 0 THEN 'cancelled' ELSE 'succeeded' END,
    1, 1, '{{}}',
    now() - make_interval(secs => n * {spacing}),
    now() - make_interval(secs => n * {spacing}),
    CASE WHEN n % 11 = 0 AND n % 7 <> 0 THEN NULL ELSE now() - make_interval(secs => n * {spacing}) END,
    now() - make_interval(secs => n * {spacing}) + make_interval(secs => (n % 50 + 1) / 100.0)
FROM generate_series(1, {count}) AS n
"""


async def finished(database_url: str, count: int, spacing_s: float) -> None:
    await execute(database_url, _FINISHED.format(count=count, spacing=spacing_s))


def test_buckets_and_percentiles_hold_within_a_bucket() -> None:
    assert bucket_of(1) == 0 and bucket_of(0.2) == 0
    assert bucket_of(2**10) == 10 * PER_DOUBLING
    assert bucket_of(10**15) == TOP_BUCKET
    durations = [n / 1000 for n in range(1, 1001)]  # 1 ms to 1 s, evenly
    histogram: dict[int, int] = {}
    for seconds in durations:
        histogram[bucket_of(seconds * 1e6)] = histogram.get(bucket_of(seconds * 1e6), 0) + 1
    width = 2 ** (1 / PER_DOUBLING)
    for share, true in ((0.5, 0.5), (0.95, 0.95), (0.01, 0.01)):
        estimate = percentile(histogram, share)
        assert estimate is not None and true / width <= estimate <= true * width, (share, estimate)
    assert percentile({}, 0.5) is None


async def test_the_buckets_of_the_rollup_are_pythons(database_url: str) -> None:
    conn = await asyncpg.connect(plain(database_url))
    try:
        for micros in (1, 3, 1000, 1500, 123_456, 7_000_000, 10**13):
            sql_bucket = await conn.fetchval(
                "SELECT least($2, floor($1 * ln(greatest(1::float8, $3::float8)) / ln(2::float8)))::int",
                PER_DOUBLING,
                TOP_BUCKET,
                micros,
            )
            assert sql_bucket == bucket_of(micros), micros
    finally:
        await conn.close()


async def assert_counted_once(database_url: str) -> None:
    """The minute rows are the finished jobs before the mark, grouped; the hour rows before the
    hours' mark are the sums of their minutes; the histograms count the runs."""
    before_mark = "finished_at < (SELECT minutes_until FROM akadze_job_stats_mark)"
    expected = await fetch(
        database_url,
        "SELECT date_trunc('minute', finished_at) AS at, queue, task, state, count(*) AS n FROM akadze_jobs "
        f"WHERE {before_mark} GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
    )
    got = await fetch(
        database_url,
        "SELECT at, queue, task, state, jobs FROM akadze_job_stats WHERE minutes = 1 ORDER BY 1, 2, 3, 4",
    )
    assert [tuple(r) for r in got] == [tuple(r) for r in expected] and got
    runs = await fetchval(
        database_url,
        "SELECT coalesce(sum(c), 0) FROM akadze_job_stats, unnest(run_counts) AS c WHERE minutes = 1",
    )
    assert runs == await fetchval(
        database_url, f"SELECT count(*) FROM akadze_jobs WHERE state <> 'cancelled' AND {before_mark}"
    )
    hours = await fetch(
        database_url,
        "SELECT at, queue, task, state, jobs FROM akadze_job_stats WHERE minutes = 60 ORDER BY 1, 2, 3, 4",
    )
    summed = await fetch(
        database_url,
        "SELECT date_trunc('hour', s.at), s.queue, s.task, s.state, sum(s.jobs)::int "
        "FROM akadze_job_stats AS s, akadze_job_stats_mark AS m WHERE s.minutes = 1 AND s.at < m.hours_until "
        "GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4",
    )
    assert [tuple(r) for r in hours] == [tuple(r) for r in summed]


async def test_every_finished_job_is_counted_once_per_minute_queue_task_and_state(
    make_app: Callable[..., Akadze], database_url: str
) -> None:
    app = make_app()
    await finished(database_url, 3000, 7.0)  # about six hours
    rolled = await roll_up(app.engine, settle_s=300, chunk_rows=500)  # many steps
    assert not rolled.yielded and rolled.minute_rows > 0 and rolled.hour_rows > 0
    await assert_counted_once(database_url)
    mark = await fetchval(database_url, "SELECT minutes_until FROM akadze_job_stats_mark")
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs WHERE finished_at >= $1", mark) > 0
    # jobs that finish past the mark are counted by the next pass, once; nothing twice
    await execute(
        database_url,
        "INSERT INTO akadze_jobs (task, queue, state, attempt, run, args, started_at, finished_at) "
        "SELECT 'mail.send', 'mail', 'succeeded', 1, 1, '{}', now() - interval '200 s', "
        "now() - interval '190 s' FROM generate_series(1, 5)",
    )
    assert (await roll_up(app.engine, settle_s=0)).minute_rows > 0
    await assert_counted_once(database_url)
    assert (await roll_up(app.engine, settle_s=0)).minute_rows == 0


async def test_a_minute_is_rolled_up_only_once_it_has_settled(
    make_app: Callable[..., Akadze], database_url: str
) -> None:
    app = make_app()
    await execute(
        database_url,
        "INSERT INTO akadze_jobs (task, queue, state, attempt, run, args, started_at, finished_at) VALUES "
        "('t', 'q', 'succeeded', 1, 1, '{}', now() - interval '20 minutes', now() - interval '10 minutes'), "
        "('t', 'q', 'succeeded', 1, 1, '{}', now() - interval '3 s', now() - interval '1 s')",
    )
    await roll_up(app.engine, settle_s=120)
    assert (
        await fetchval(database_url, "SELECT coalesce(sum(jobs), 0) FROM akadze_job_stats WHERE minutes = 1")
        == 1
    )
    mark = await fetchval(database_url, "SELECT minutes_until FROM akadze_job_stats_mark")
    assert mark <= datetime.now(UTC) - timedelta(seconds=120)
    # the long run lands in the top part of the histogram: 10 minutes is bucket 4 * log2(6e8)
    buckets = await fetchval(database_url, "SELECT run_buckets FROM akadze_job_stats WHERE minutes = 1")
    assert buckets == [bucket_of(600e6)]


async def test_one_worker_rolls_up_at_a_time(make_app: Callable[..., Akadze], database_url: str) -> None:
    app = make_app()
    await finished(database_url, 100, 30.0)
    holder = await asyncpg.connect(plain(database_url))
    try:
        async with holder.transaction():
            await holder.execute("SELECT pg_advisory_xact_lock($1)", ROLLUP)
            rolled = await roll_up(app.engine, settle_s=0)
            assert rolled.yielded and rolled.minute_rows == 0
        assert await fetchval(database_url, "SELECT count(*) FROM akadze_job_stats") == 0
    finally:
        await holder.close()
    # two at once: each minute once
    await asyncio.gather(roll_up(app.engine, settle_s=0), roll_up(app.engine, settle_s=0))
    await assert_counted_once(database_url)


async def test_old_rows_are_pruned_and_a_lost_mark_starts_after_what_was_written(
    make_app: Callable[..., Akadze], database_url: str
) -> None:
    app = make_app()
    await finished(database_url, 300, 600.0)  # 50 hours
    await roll_up(app.engine, settle_s=0, minute_keep_s=86_400, hour_keep_s=40 * 3600)
    oldest_minute = await fetchval(database_url, "SELECT min(at) FROM akadze_job_stats WHERE minutes = 1")
    oldest_hour = await fetchval(database_url, "SELECT min(at) FROM akadze_job_stats WHERE minutes = 60")
    now = datetime.now(UTC)
    assert now - oldest_minute <= timedelta(days=1) and now - oldest_hour <= timedelta(hours=41)
    total = await fetchval(database_url, "SELECT sum(jobs) FROM akadze_job_stats")
    await execute(database_url, "DELETE FROM akadze_job_stats_mark")
    await roll_up(app.engine, settle_s=0, minute_keep_s=86_400, hour_keep_s=40 * 3600)
    assert await fetchval(database_url, "SELECT sum(jobs) FROM akadze_job_stats") == total


async def test_a_serving_worker_rolls_up_and_a_burst_does_not(
    make_app: Callable[..., Akadze], database_url: str
) -> None:
    from akadze.testing import drain
    from akadze.worker.trends import trends_service

    app = make_app()

    @app.task("t", queue="q")
    async def t() -> None: ...

    assert "trends" in [getattr(service, "__name__", "") for service in Worker(app).services]
    await t.enqueue_many([{}] * 3)
    await execute(database_url, "UPDATE akadze_jobs SET run_at = now() - interval '5 minutes'")
    await drain(app, queues=["q"])
    await execute(database_url, "UPDATE akadze_jobs SET finished_at = finished_at - interval '5 minutes'")
    assert (
        await fetchval(database_url, "SELECT count(*) FROM akadze_job_stats") == 0
    )  # a burst rolls nothing up
    worker = Worker(app, queues=["q"])
    worker.services = [trends_service(first_delay_s=0, interval_s=3600)]
    serving = asyncio.create_task(worker.run(handle_signals=False))
    try:
        for _ in range(200):
            if await fetchval(
                database_url, "SELECT coalesce(sum(jobs), 0) FROM akadze_job_stats WHERE minutes = 1"
            ):
                break
            await asyncio.sleep(0.05)
    finally:
        worker.stop()
        await asyncio.wait_for(serving, 20)
    assert await fetchval(database_url, "SELECT sum(jobs) FROM akadze_job_stats WHERE minutes = 1") == 3


def _chart_rows(page: str) -> list[list[str]]:
    """The cells of the charts' table: succeeded, failed, cancelled, p50, p95 per slot."""
    table = re.search(r'<table class="grid" id="trend-table">.*?</table>', page, re.S)
    assert table is not None, page
    return [
        re.findall(r'<td class="num">([^<]*)</td>', row)
        for row in re.findall(r"<tr>(.*?)</tr>", table[0])[1:]
    ]


async def test_the_page_shows_what_the_table_holds(
    make_app: Callable[..., Akadze], database_url: str
) -> None:
    app = make_app()
    async with client_for(create_app(app)) as client:
        empty = await client.get("/trends")
        assert empty.status_code == 200 and 'id="no-trends"' in empty.text
        await finished(database_url, 1000, 3.0)  # the last 50 minutes
        await roll_up(app.engine, settle_s=0)
        rolled = await fetchval(
            database_url,
            "SELECT count(*) FROM akadze_jobs, akadze_job_stats_mark AS m "
            "WHERE finished_at < m.minutes_until",
        )
        assert rolled > 900
        for range_name, slots in (("hour", 60), ("day", 24), ("week", 168)):
            page = await client.get("/trends", params={"range": range_name})
            assert page.status_code == 200 and page.text.count("<svg") == 3
            rows = _chart_rows(page.text)
            assert len(rows) == slots, range_name
            assert sum(int(cell) for row in rows for cell in row[:3]) == rolled, range_name
            assert page.text.count('<rect class="s-') >= 1
        page = (await client.get("/trends", params={"range": "day", "task": "report.build"})).text
        reports = await fetchval(
            database_url,
            "SELECT count(*) FROM akadze_jobs, akadze_job_stats_mark AS m "
            "WHERE task = 'report.build' AND finished_at < m.minutes_until",
        )
        assert sum(int(cell) for row in _chart_rows(page) for cell in row[:3]) == reports
        per_task = re.search(r'<table class="grid" id="by-task">.*?</table>', page, re.S)
        assert per_task is not None
        row = re.search(r"report\.build</a></td>.*?</tr>", per_task[0], re.S)
        assert row is not None and re.findall(r'<td class="num[^"]*">(?:<a[^>]*>)?(\d+)', row[0])[0] == str(
            reports
        )
        assert (await client.get("/trends", params={"range": "year"})).status_code == 400
