"""Schedules: registration errors, fire times (pure, DST included), and firing on a real database."""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings, strategies as st
from sqlalchemy import text

from akadze import Akadze
from akadze.db.queries import Queries
from akadze.errors import ConfigError
from akadze.schedule import (
    Schedule,
    due_fire_times,
    fire_times,
    latest_fire_at_or_before,
    next_fire_after,
)
from akadze.worker import Worker
from akadze.worker.scheduler import SchedulerState, backfill, fire_due_schedules
from tests.conftest import wait_until

NEW_YORK = ZoneInfo("America/New_York")


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


def offline_app() -> Akadze:
    """An app for registration and pure tests: its engine never connects."""
    return Akadze(database_url="postgresql://nobody@127.0.0.1:1/none")


@functools.cache
def make_schedule(cron: str | None = None, every: timedelta | None = None, tz: str | None = None) -> Schedule:
    app = offline_app()

    @app.task("noop")
    async def noop() -> None:
        return None

    return app.schedule("s", noop, cron=cron, every=every, tz=tz)


# -- registration ---------------------------------------------------------------------------------


class TestRegistration:
    def setup_method(self) -> None:
        self.app = offline_app()

        @self.app.task("report")
        async def report(region: str, limit: int = 10) -> None:
            return None

        self.report = report

    def test_schedule_with_fixed_args_is_registered(self) -> None:
        sched = self.app.schedule(
            "eu", self.report, cron="0 6 * * *", args={"region": "eu"}, tz="Europe/Paris"
        )
        assert self.app.schedules["eu"] is sched
        assert sched.tz == "Europe/Paris"
        assert dict(sched.args) == {"region": "eu"}
        assert sched.expression == "0 6 * * *"

    def test_periodic_declares_a_task_and_its_schedule(self) -> None:
        @self.app.periodic("cleanup", every=timedelta(minutes=15), queue="maintenance")
        async def cleanup() -> None:
            return None

        assert self.app.tasks["cleanup"] is cleanup
        assert cleanup.queue == "maintenance"
        assert self.app.schedules["cleanup"].task is cleanup
        assert self.app.schedules["cleanup"].expression == "every 15m"

    @pytest.mark.parametrize(
        ("options", "message"),
        [
            ({}, "exactly one of cron or every"),
            ({"cron": "* * * * *", "every": timedelta(seconds=5)}, "exactly one of cron or every"),
            ({"cron": "61 * * * *"}, "bad cron expression '61 \\* \\* \\* \\*'"),
            ({"cron": "* * *"}, "bad cron expression"),
            ({"cron": "@fortnightly"}, "unknown cron alias"),
            ({"cron": ""}, "cron must be a non-empty string"),
            ({"cron": "0 0 30 2 *"}, "bad cron expression"),
            ({"cron": "0 3 * * *", "tz": "Mars/Olympus_Mons"}, "unknown time zone 'Mars/Olympus_Mons'"),
            ({"every": timedelta(seconds=5), "tz": "Europe/Paris"}, "tz applies to cron expressions only"),
            ({"every": timedelta(milliseconds=1500)}, "whole number of seconds"),
            ({"every": timedelta(0)}, "whole number of seconds"),
            ({"every": 5}, "every must be a timedelta"),
        ],
        ids=[
            "neither",
            "both",
            "minute-out-of-range",
            "too-few-fields",
            "unknown-alias",
            "empty",
            "never-fires",
            "unknown-zone",
            "tz-with-every",
            "fractional-seconds",
            "zero",
            "not-a-timedelta",
        ],
    )
    def test_bad_schedule_is_a_clear_error(self, options: dict[str, Any], message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            self.app.schedule("bad", self.report, args={"region": "eu"}, **options)
        assert "bad" not in self.app.schedules

    @pytest.mark.parametrize(
        ("args", "message"),
        [
            ({}, "region: Field required"),
            ({"region": "eu", "limit": "many"}, "limit: Input should be a valid integer"),
            ({"region": "eu", "colour": "red"}, "colour: Extra inputs are not permitted"),
        ],
        ids=["missing", "wrong-type", "unknown"],
    )
    def test_args_that_do_not_fit_the_signature_are_a_clear_error(
        self, args: dict[str, Any], message: str
    ) -> None:
        with pytest.raises(ConfigError, match=f"schedule 'x': args do not fit task 'report': .*{message}"):
            self.app.schedule("x", self.report, every=timedelta(minutes=1), args=args)

    def test_duplicate_schedule_name_is_a_clear_error(self) -> None:
        self.app.schedule("x", self.report, every=timedelta(minutes=1), args={"region": "eu"})
        with pytest.raises(ConfigError, match="schedule 'x' is already registered"):
            self.app.schedule("x", self.report, every=timedelta(minutes=2), args={"region": "us"})

    def test_periodic_that_fails_registers_nothing(self) -> None:
        with pytest.raises(ConfigError, match="unknown time zone"):

            @self.app.periodic("nightly", cron="0 3 * * *", tz="Nowhere/Special")
            async def nightly() -> None:
                return None

        assert "nightly" not in self.app.tasks
        assert "nightly" not in self.app.schedules

    def test_periodic_task_must_take_no_arguments(self) -> None:
        with pytest.raises(ConfigError, match="must take no arguments"):

            @self.app.periodic("p", every=timedelta(minutes=1))  # type: ignore[arg-type]  # the error under test
            async def p(x: int) -> None:
                return None

    def test_cron_aliases_stand_for_their_expressions(self) -> None:
        sched = self.app.schedule("d", self.report, cron="@daily", args={"region": "eu"})
        assert sched.expression == "@daily"
        assert next_fire_after(sched, utc(2024, 5, 1, 12)) == utc(2024, 5, 2)

    def test_grace_must_be_shorter_than_retention(self) -> None:
        with pytest.raises(ConfigError, match=r"grace .* must be shorter than retention"):
            Akadze(
                database_url="postgresql://nobody@127.0.0.1:1/none",
                grace=timedelta(days=7),
                retention=timedelta(days=7),
            )


# -- fire times: intervals ------------------------------------------------------------------------


class TestEvery:
    def test_fire_times_are_multiples_of_the_interval_since_the_epoch(self) -> None:
        sched = make_schedule(every=timedelta(minutes=15))
        assert next_fire_after(sched, utc(2024, 5, 1, 10, 7, 30)) == utc(2024, 5, 1, 10, 15)
        assert next_fire_after(sched, utc(2024, 5, 1, 10, 15)) == utc(2024, 5, 1, 10, 30)
        assert latest_fire_at_or_before(sched, utc(2024, 5, 1, 10, 15)) == utc(2024, 5, 1, 10, 15)

    def test_other_offsets_give_the_same_instants(self) -> None:
        sched = make_schedule(every=timedelta(hours=1))
        after = datetime(2024, 5, 1, 12, 30, tzinfo=NEW_YORK)
        assert next_fire_after(sched, after) == utc(2024, 5, 1, 17)

    def test_naive_datetimes_are_refused(self) -> None:
        with pytest.raises(ValueError, match="naive"):
            next_fire_after(make_schedule(every=timedelta(seconds=1)), datetime(2024, 1, 1))

    @settings(max_examples=100, deadline=None)
    @given(
        seconds=st.integers(min_value=1, max_value=10 * 86400),
        after=st.datetimes(
            min_value=datetime(1990, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
        ),
    )
    def test_next_fire_is_the_next_multiple(self, seconds: int, after: datetime) -> None:
        every = timedelta(seconds=seconds)
        sched = make_schedule(every=every)
        fire = next_fire_after(sched, after)
        assert after < fire <= after + every
        assert (fire - datetime(1970, 1, 1, tzinfo=UTC)) % every == timedelta(0)
        assert latest_fire_at_or_before(sched, fire) == fire
        assert latest_fire_at_or_before(sched, after) == fire - every


# -- fire times: cron, time zones and daylight saving ---------------------------------------------


class TestCron:
    def test_cron_in_utc(self) -> None:
        sched = make_schedule(cron="*/10 9-17 * * MON-FRI")
        assert next_fire_after(sched, utc(2024, 5, 3, 17, 55)) == utc(2024, 5, 6, 9)

    def test_six_fields_start_with_seconds(self) -> None:
        sched = make_schedule(cron="*/20 * * * * *")
        assert fire_times(sched, utc(2024, 1, 1), utc(2024, 1, 1, 0, 1), limit=10) == [
            utc(2024, 1, 1, 0, 0, 20),
            utc(2024, 1, 1, 0, 0, 40),
            utc(2024, 1, 1, 0, 1),
        ]

    def test_cron_is_read_in_its_zone(self) -> None:
        sched = make_schedule(cron="0 9 * * *", tz="Asia/Tokyo")
        assert next_fire_after(sched, utc(2024, 5, 1, 1)) == utc(2024, 5, 2, 0)

    def test_a_time_skipped_by_spring_forward_fires_once_right_after_the_jump(self) -> None:
        # 2024-03-10 in New York: 02:00 EST jumps to 03:00 EDT; 02:30 does not exist that day
        sched = make_schedule(cron="30 2 * * *", tz="America/New_York")
        fires = fire_times(sched, utc(2024, 3, 8, 12), utc(2024, 3, 12, 12), limit=10)
        assert [f.astimezone(NEW_YORK).isoformat() for f in fires] == [
            "2024-03-09T02:30:00-05:00",
            "2024-03-10T03:00:00-04:00",
            "2024-03-11T02:30:00-04:00",
            "2024-03-12T02:30:00-04:00",
        ]

    def test_a_time_repeated_by_fall_back_fires_once_at_its_first_occurrence(self) -> None:
        # 2024-11-03 in New York: 02:00 EDT falls back to 01:00 EST; 01:30 happens twice
        sched = make_schedule(cron="30 1 * * *", tz="America/New_York")
        fires = fire_times(sched, utc(2024, 11, 2, 12), utc(2024, 11, 4, 12), limit=10)
        assert fires == [utc(2024, 11, 3, 5, 30), utc(2024, 11, 4, 6, 30)]
        assert fires[0].astimezone(NEW_YORK).isoformat() == "2024-11-03T01:30:00-04:00"

    def test_hourly_expressions_follow_real_time_across_both_changes(self) -> None:
        sched = make_schedule(cron="0 * * * *", tz="America/New_York")
        fall = fire_times(sched, utc(2024, 11, 3, 4, 30), utc(2024, 11, 3, 8), limit=10)
        assert fall == [utc(2024, 11, 3, 5), utc(2024, 11, 3, 6), utc(2024, 11, 3, 7), utc(2024, 11, 3, 8)]
        assert [f.astimezone(NEW_YORK).strftime("%H:%M%z") for f in fall] == [
            "01:00-0400",
            "01:00-0500",
            "02:00-0500",
            "03:00-0500",
        ]
        spring = fire_times(sched, utc(2024, 3, 10, 5, 30), utc(2024, 3, 10, 8), limit=10)
        assert [f.astimezone(NEW_YORK).strftime("%H:%M%z") for f in spring] == [
            "01:00-0500",
            "03:00-0400",
            "04:00-0400",
        ]

    def test_due_fire_times_across_a_dst_change(self) -> None:
        # the worker looks 20 s after the jump: the 02:30 run, moved to 03:00 EDT, is due once
        sched = make_schedule(cron="30 2 * * *", tz="America/New_York")
        jump = utc(2024, 3, 10, 7)
        due = due_fire_times(
            sched,
            last_fire_at=utc(2024, 3, 9, 7, 30),
            now=jump + timedelta(seconds=20),
            grace=timedelta(minutes=1),
            limit=10,
        )
        assert due.fire_times == [jump]
        assert due.skipped is None

    @settings(max_examples=150, deadline=None)
    @given(
        cron=st.sampled_from(["*/7 * * * *", "0 */3 * * *", "15 4 * * 1-5", "0 0 1 * *", "*/45 * * * * *"]),
        tz=st.sampled_from(["UTC", "Europe/Berlin", "Asia/Kolkata"]),
        after=st.datetimes(
            min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(UTC)
        ),
    )
    def test_fire_times_increase_and_bracket_any_moment(self, cron: str, tz: str, after: datetime) -> None:
        sched = make_schedule(cron=cron, tz=tz)
        fire = next_fire_after(sched, after)
        assert fire > after
        assert fire.tzinfo is UTC
        assert next_fire_after(sched, fire) > fire
        previous = latest_fire_at_or_before(sched, after)
        assert previous <= after
        assert next_fire_after(sched, previous) == fire

    @settings(max_examples=300, deadline=None)
    @given(
        cron=st.sampled_from(["30 2 * * *", "30 1 * * *", "15,45 0-3 * * *", "0 * * * *", "*/20 1-3 * * *"]),
        change=st.sampled_from(
            [
                ("America/New_York", utc(2024, 3, 10)),
                ("America/New_York", utc(2024, 11, 3)),
                ("Australia/Lord_Howe", utc(2024, 4, 7)),  # a half-hour change
                ("Europe/Berlin", utc(2024, 10, 27)),
            ]
        ),
        minutes=st.integers(min_value=-24 * 60, max_value=48 * 60),
        microseconds=st.sampled_from([0, 1, 999_999]),
    )
    def test_fire_times_bracket_any_moment_across_dst_changes(
        self, cron: str, change: tuple[str, datetime], minutes: int, microseconds: int
    ) -> None:
        zone, day = change
        sched = make_schedule(cron=cron, tz=zone)
        moment = day + timedelta(minutes=minutes, microseconds=microseconds)
        fire = next_fire_after(sched, moment)
        previous = latest_fire_at_or_before(sched, moment)
        assert previous <= moment < fire
        assert next_fire_after(sched, previous) == fire


# -- what is due ----------------------------------------------------------------------------------


class TestDue:
    sched = make_schedule(every=timedelta(seconds=10))
    now = utc(2024, 5, 1, 12, 0, 35)

    def test_a_new_schedule_fires_only_its_latest_fire_time_within_grace(self) -> None:
        due = due_fire_times(
            self.sched, last_fire_at=None, now=self.now, grace=timedelta(minutes=1), limit=100
        )
        assert due.fire_times == [utc(2024, 5, 1, 12, 0, 30)]
        late = due_fire_times(
            self.sched, last_fire_at=None, now=self.now, grace=timedelta(seconds=2), limit=100
        )
        assert late.fire_times == []

    def test_a_short_outage_is_caught_up_within_grace(self) -> None:
        due = due_fire_times(
            self.sched, last_fire_at=utc(2024, 5, 1, 12), now=self.now, grace=timedelta(minutes=1), limit=100
        )
        assert due.fire_times == [utc(2024, 5, 1, 12, 0, s) for s in (10, 20, 30)]
        assert due.skipped is None

    def test_fire_times_later_than_grace_are_skipped_not_returned(self) -> None:
        due = due_fire_times(
            self.sched,
            last_fire_at=utc(2024, 5, 1, 11, 50),
            now=self.now,
            grace=timedelta(seconds=12),
            limit=100,
        )
        assert due.fire_times == [utc(2024, 5, 1, 12, 0, 30)]
        assert due.skipped == (utc(2024, 5, 1, 11, 50, 10), utc(2024, 5, 1, 12, 0, 20))

    def test_a_catch_up_goes_in_order_and_in_bounded_steps(self) -> None:
        due = due_fire_times(
            self.sched, last_fire_at=utc(2024, 5, 1, 12), now=self.now, grace=timedelta(minutes=1), limit=2
        )
        assert due.fire_times == [utc(2024, 5, 1, 12, 0, 10), utc(2024, 5, 1, 12, 0, 20)]


# -- firing on the database -----------------------------------------------------------------------


async def _runs(app: Akadze) -> list[tuple[datetime, int | None]]:
    async with app.engine.connect() as conn:
        result = await conn.execute(text("SELECT fire_at, job_id FROM akadze_schedule_runs ORDER BY fire_at"))
        return [(row.fire_at, row.job_id) for row in result]


async def _jobs_of(app: Akadze, task: str) -> list[int]:
    async with app.engine.connect() as conn:
        result = await conn.execute(
            text("SELECT id FROM akadze_jobs WHERE task = :t ORDER BY id"), {"t": task}
        )
        return [row.id for row in result]


async def _db_now(app: Akadze) -> datetime:
    async with app.engine.connect() as conn:
        now: datetime = await conn.scalar(text("SELECT now()"))
        return now


def _every_second(app: Akadze, name: str = "tick") -> None:
    @app.periodic(name, every=timedelta(seconds=1))
    async def tick() -> None:
        return None


async def test_a_due_fire_time_becomes_one_job_with_its_args(make_app: Callable[..., Akadze]) -> None:
    app = make_app()

    @app.task("greet")
    async def greet(name: str) -> str:
        return f"hello {name}"

    app.schedule("greet-often", greet, every=timedelta(seconds=1), args={"name": "ada"})
    look = await fire_due_schedules(app)
    assert len(look.fired) == 1
    job = look.fired[0]
    assert (job.task, job.args) == ("greet", {"name": "ada"})
    runs = await _runs(app)
    assert runs == [(runs[0][0], job.id)]
    assert runs[0][0] <= look.now
    again = await fire_due_schedules(app)
    assert all(j.id != job.id for j in again.fired)
    assert len(await _jobs_of(app, "greet")) == len(await _runs(app))


async def test_concurrent_looks_enqueue_each_fire_time_once(make_app: Callable[..., Akadze]) -> None:
    apps = [make_app(grace=timedelta(seconds=30)) for _ in range(4)]
    for app in apps:
        _every_second(app)
    # a recorded run 10 s ago: every look tries to catch up the same ten fire times at once
    now = await _db_now(apps[0])
    async with apps[0].engine.begin() as conn:
        start = now.replace(microsecond=0) - timedelta(seconds=10)
        assert await Queries.fire_schedule(conn, "tick", start, 30.0)
    looks = await asyncio.gather(*(fire_due_schedules(app) for app in apps))
    fired = [job.id for look in looks for job in look.fired]
    runs = await _runs(apps[0])
    assert len(runs) >= 11
    assert [f for f, _ in runs] == [start + timedelta(seconds=i) for i in range(len(runs))]
    assert sorted(fired) == sorted(job_id for _, job_id in runs[1:] if job_id is not None)
    assert sorted(fired) == await _jobs_of(apps[0], "tick")


async def test_the_claim_refuses_fire_times_not_due_by_the_database_clock(app: Akadze) -> None:
    now = await _db_now(app)
    async with app.engine.begin() as conn:
        assert not await Queries.fire_schedule(conn, "s", now + timedelta(seconds=5), 60.0)
        assert not await Queries.fire_schedule(conn, "s", now - timedelta(seconds=61), 60.0)
        assert await Queries.fire_schedule(conn, "s", now - timedelta(seconds=59), 60.0)
        assert not await Queries.fire_schedule(conn, "s", now - timedelta(seconds=59), 60.0)


async def test_a_failed_enqueue_releases_the_fire_time_for_the_next_look(
    make_app: Callable[..., Akadze], caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app()
    _every_second(app)
    failing = [True]

    def hook(conn: Any, job: Any) -> None:
        if failing[0]:
            raise RuntimeError("hook is down")

    app.hooks.on_enqueue.append(hook)
    with caplog.at_level(logging.WARNING, logger="akadze.scheduler"):
        look = await fire_due_schedules(app)
    assert look.fired == []
    assert await _runs(app) == []
    assert "enqueueing fire time" in caplog.text
    assert "RuntimeError: hook is down" in caplog.text
    failing[0] = False
    look = await fire_due_schedules(app)
    assert len(look.fired) == 1
    assert len(await _runs(app)) == 1


async def test_a_worker_started_after_a_pause_longer_than_grace_skips_the_missed_fire_times(
    make_app: Callable[..., Akadze], caplog: pytest.LogCaptureFixture
) -> None:
    grace = timedelta(seconds=1)
    app = make_app(grace=grace)
    _every_second(app)

    async def serve_until(predicate: Callable[[list[tuple[datetime, int | None]]], bool]) -> None:
        worker = Worker(app, listen=False, poll_interval=timedelta(milliseconds=100))
        running = asyncio.create_task(worker.run(handle_signals=False))

        async def done() -> bool:
            return predicate(await _runs(app))

        await wait_until(done, timeout=10)
        worker.stop()
        await running

    await serve_until(lambda runs: len(runs) >= 2)
    before = await _runs(app)
    # the pause under test: three times grace with no worker
    await asyncio.sleep(3 * grace.total_seconds())
    resumed_at = await _db_now(app)
    with caplog.at_level(logging.INFO, logger="akadze.scheduler"):
        await serve_until(lambda runs: runs[-1][0] > resumed_at)
    runs = await _runs(app)
    after = runs[len(before) :]
    assert runs[: len(before)] == before
    last_before, first_after = before[-1][0], after[0][0]
    # nothing between the last fire before the pause and now - grace at the restart
    assert first_after > resumed_at - grace - timedelta(seconds=1)
    assert first_after - last_before >= timedelta(seconds=3)
    assert [f for f, _ in after] == [first_after + timedelta(seconds=i) for i in range(len(after))]
    skips = [r for r in caplog.records if "skipped fire times" in r.getMessage()]
    assert len(skips) == 1
    assert skips[0].levelno == logging.INFO
    assert (last_before + timedelta(seconds=1)).isoformat() in skips[0].getMessage()
    # one job per recorded fire time, each one late by at most grace
    assert sorted(job_id for _, job_id in runs if job_id is not None) == await _jobs_of(app, "tick")
    async with app.engine.connect() as conn:
        late = await conn.scalar(text("SELECT max(created_at - fire_at) FROM akadze_schedule_runs"))
    assert late <= grace


async def test_skips_are_logged_once_per_scheduler(
    make_app: Callable[..., Akadze], caplog: pytest.LogCaptureFixture
) -> None:
    app = make_app(grace=timedelta(seconds=5))

    @app.periodic("daily", cron="0 3 * * *")
    async def daily() -> None:
        return None

    now = await _db_now(app)
    async with app.engine.begin() as conn:
        await conn.execute(
            text("INSERT INTO akadze_schedule_runs (schedule, fire_at) VALUES ('daily', :f)"),
            {"f": latest_fire_at_or_before(app.schedules["daily"], now) - timedelta(days=2)},
        )
    state = SchedulerState()
    with caplog.at_level(logging.INFO, logger="akadze.scheduler"):
        for _ in range(3):
            await fire_due_schedules(app, state)
    assert len([r for r in caplog.records if "skipped fire times" in r.getMessage()]) == 1


async def test_backfill_enqueues_missed_fire_times_once(make_app: Callable[..., Akadze]) -> None:
    app = make_app(grace=timedelta(seconds=1), retention=timedelta(hours=1))

    @app.periodic("quarter", every=timedelta(minutes=15))
    async def quarter() -> None:
        return None

    now = await _db_now(app)
    since = now - timedelta(minutes=50)
    jobs = await backfill(app, "quarter", since=since)
    expected = fire_times(app.schedules["quarter"], since, now, limit=10)
    assert len(expected) in (3, 4)
    assert [f for f, _ in await _runs(app)] == expected
    assert [j.id for j in jobs] == await _jobs_of(app, "quarter")
    assert await backfill(app, "quarter", since=since) == []
    with pytest.raises(ValueError, match="within retention"):
        await backfill(app, "quarter", since=now - timedelta(hours=2))


# -- akadze schedules list ------------------------------------------------------------------------


def test_schedules_list_shows_expression_zone_and_last_and_next_fire(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from akadze.cli import app as cli
    from tests.support import execute

    monkeypatch.setenv("AKADZE_DATABASE_URL", database_url)
    asyncio.run(
        execute(
            database_url,
            "INSERT INTO akadze_schedule_runs (schedule, fire_at) VALUES "
            "('every-second', '2024-05-01 12:00:00+00'), ('every-second', '2024-05-01 12:00:01+00')",
        )
    )
    result = CliRunner().invoke(cli, ["schedules", "list", "tests.apps.schedule_app:app_from_env"])
    assert result.exit_code == 0, result.output
    header, every, nightly = (re.split(r"\s{2,}", line) for line in result.output.splitlines())
    assert header == ["NAME", "TASK", "EXPRESSION", "ZONE", "LAST FIRE", "NEXT FIRE"]
    assert every[:5] == ["every-second", "every-second", "every 1s", "UTC", "2024-05-01T12:00:01+00:00"]
    assert nightly[:5] == ["nightly-report", "report", "30 2 * * *", "America/New_York", "-"]
    # shown in the schedule's zone: 02:30, or 03:00 on the day the clocks spring forward
    assert nightly[5].endswith(("T02:30:00-04:00", "T02:30:00-05:00", "T03:00:00-04:00"))


def test_schedules_list_without_an_app_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from akadze.cli import app as cli

    monkeypatch.delenv("AKADZE_APP", raising=False)
    result = CliRunner().invoke(cli, ["schedules", "list"])
    assert result.exit_code == 2
    assert "name the app" in result.output
