"""Unique jobs: the key (pure), the declaration checks, and the database making one job per key
for racing producers, batches, caller transactions, retries and requeues."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID

import pydantic
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from akadze import Akadze, Fail, JobState, Retry, Unique, requeue
from akadze.errors import ConfigError, UniqueConflictError
from akadze.flow import arguments_of, check_unique, unique_key
from akadze.testing import drain
from tests.conftest import wait_until
from tests.support import execute, fetch, fetchval, module_database


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


# -- the key (pure) -------------------------------------------------------------------------


class TestUniqueKey:
    def test_key_order_and_spacing_of_the_stored_json_do_not_matter(self) -> None:
        unique = Unique()
        assert unique_key("t", unique, '{"a": 1, "b": [1, {"y": 2, "x": 1}]}') == unique_key(
            "t", unique, '{"b":[1,{"x":1,"y":2}],"a":1}'
        )

    def test_only_the_chosen_arguments_count(self) -> None:
        unique = Unique(args=("a",))
        assert unique_key("t", unique, '{"a": 1, "b": 2}') == unique_key("t", unique, '{"a": 1, "b": 3}')
        assert unique_key("t", unique, '{"a": 1}') != unique_key("t", unique, '{"a": 2}')

    def test_task_period_and_values_make_different_keys(self) -> None:
        payload = '{"a": 1}'
        keys = {
            unique_key("t", Unique(), payload),
            unique_key("u", Unique(), payload),
            unique_key("t", Unique(period=timedelta(minutes=1)), payload),
            unique_key("t", Unique(period=timedelta(minutes=2)), payload),
            unique_key("t", Unique(), '{"a": "1"}'),
            unique_key("t", Unique(), "{}"),
        }
        assert len(keys) == 6

    def test_an_argument_left_out_is_not_the_same_as_one_given(self) -> None:
        assert unique_key("t", Unique(), '{"a": 1}') != unique_key("t", Unique(), '{"a": 1, "b": null}')


# -- declaration checks (pure) ----------------------------------------------------------------


class Color(Enum):
    RED = "red"


class Point(pydantic.BaseModel):
    x: int
    y: float


def params_of(fn: Callable[..., Any]) -> dict[str, Any]:
    import inspect

    return arguments_of(fn, inspect.signature(fn))


def takes(a: int, b: str, c: UUID, d: Color, e: list[int], f: dict[str, int] | None = None) -> None: ...


def loose(x: float, y: set[int], z: Decimal, p: Point, u: Any, n: list[frozenset[int]]) -> None: ...


class TestCheckUnique:
    def test_stable_arguments_pass_and_args_are_normalized(self) -> None:
        checked = check_unique("t", Unique(args=["b", "a", "a"]), params_of(takes))
        assert checked is not None
        assert checked.args == ("a", "b")
        assert check_unique("t", Unique(), params_of(takes)) is not None
        assert check_unique("t", None, params_of(takes)) is None

    @pytest.mark.parametrize(
        ("unique", "words"),
        [
            (Unique(args=["nope"]), ["'t'", "'nope'", "does not take"]),
            (Unique(args="a"), ["'t'", "args=['a']"]),
            (Unique(period=timedelta(0)), ["'t'", "positive timedelta"]),
            (Unique(period=5), ["'t'", "positive timedelta"]),  # type: ignore[arg-type]
            (Unique(states=[JobState.QUEUED]), ["'t'", "queued and running"]),
            (Unique(states=["queued", "running", "done"]), ["'t'", "unknown state"]),
        ],
        ids=[
            "unknown-arg",
            "args-a-string",
            "zero-period",
            "period-not-timedelta",
            "states-lack-running",
            "bad-state",
        ],
    )
    def test_bad_options_are_one_config_error_naming_the_task_and_the_fix(
        self, unique: Unique, words: list[str]
    ) -> None:
        with pytest.raises(ConfigError) as caught:
            check_unique("t", unique, params_of(takes))
        for word in words:
            assert word in str(caught.value)

    @pytest.mark.parametrize(
        ("name", "word"),
        [("x", "float"), ("y", "set"), ("z", "Decimal"), ("p", "float"), ("u", "Any"), ("n", "set")],
    )
    def test_an_argument_without_a_stable_json_form_is_refused(self, name: str, word: str) -> None:
        with pytest.raises(ConfigError, match=f"'{name}'.*no stable JSON form.*{word}"):
            check_unique("t", Unique(args=[name]), params_of(loose))

    def test_all_arguments_means_every_one_must_be_stable(self) -> None:
        with pytest.raises(ConfigError, match="'x'"):
            check_unique("t", Unique(), params_of(loose))

    def test_the_app_refuses_a_bad_unique_at_declaration(self) -> None:
        app = Akadze(database_url="postgresql://localhost/none")
        with pytest.raises(ConfigError, match=r"task 'mail\.send'.*'nope'"):

            @app.task("mail.send", unique=Unique(args=["nope"]))
            async def send(user_id: int) -> None: ...

        assert "mail.send" not in app.tasks


# -- the database makes one job per key ----------------------------------------------------------


def unique_app(make_app: Callable[..., Akadze], **unique: Any) -> tuple[Akadze, Any]:
    app = make_app()

    @app.task("report", unique=Unique(**unique))
    async def report(account: int, note: str = "") -> None: ...

    return app, report


async def test_a_duplicate_returns_the_existing_job_marked_duplicate(make_app: Callable[..., Akadze]) -> None:
    _, report = unique_app(make_app)
    first = await report.enqueue(account=1)
    second = await report.enqueue(account=1)
    other = await report.enqueue(account=2)
    assert first.duplicate is False and other.duplicate is False
    assert second.duplicate is True
    assert second.id == first.id
    assert second.args == {"account": 1} and second.state is JobState.QUEUED
    assert other.id != first.id


async def test_only_the_chosen_arguments_make_two_jobs_the_same(make_app: Callable[..., Akadze]) -> None:
    _, report = unique_app(make_app, args=["account"])
    first = await report.enqueue(account=1, note="a")
    second = await report.enqueue(account=1, note="b")
    assert second.duplicate and second.id == first.id
    assert second.args == {"account": 1, "note": "a"}


async def test_a_plain_task_writes_no_key(app: Akadze, database_url: str) -> None:
    @app.task("plain")
    async def plain(account: int) -> None: ...

    first = await plain.enqueue(account=1)
    second = await plain.enqueue(account=1)
    assert first.id != second.id and not second.duplicate
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs WHERE unique_key IS NOT NULL") == 0


async def test_a_finished_job_no_longer_blocks_by_default(make_app: Callable[..., Akadze]) -> None:
    app, report = unique_app(make_app)
    first = await report.enqueue(account=1)
    await drain(app)
    again = await report.enqueue(account=1)
    assert again.id != first.id and not again.duplicate


async def test_states_may_make_finished_jobs_block_too(make_app: Callable[..., Akadze]) -> None:
    app, report = unique_app(make_app, states=[JobState.QUEUED, JobState.RUNNING, JobState.SUCCEEDED])
    first = await report.enqueue(account=1)
    await drain(app)
    again = await report.enqueue(account=1)
    assert again.duplicate and again.id == first.id and again.state is JobState.SUCCEEDED


async def test_a_period_makes_one_job_per_window(make_app: Callable[..., Akadze], database_url: str) -> None:
    period = timedelta(hours=1)
    _, report = unique_app(make_app, period=period, states=[*JobState])
    first = await report.enqueue(account=1)
    assert (await report.enqueue(account=1)).id == first.id
    # the key ends with the number of the window, on the database's clock
    key, window = (
        await fetch(
            database_url,
            "SELECT unique_key, floor(extract(epoch FROM now()) / 3600)::bigint AS w FROM akadze_jobs",
        )
    )[0]
    assert key.endswith(f":{window}")
    # the same job in the previous window no longer blocks
    await execute(database_url, f"UPDATE akadze_jobs SET unique_key = '{key.rsplit(':', 1)[0]}:{window - 1}'")
    fresh = await report.enqueue(account=1)
    assert fresh.id != first.id and not fresh.duplicate


async def test_twenty_racing_producers_make_one_job(
    make_app: Callable[..., Akadze], database_url: str
) -> None:
    app = make_app(pool_size=20)

    @app.task("report", unique=Unique())
    async def report(account: int) -> None: ...

    jobs = await asyncio.gather(*(report.enqueue(account=7) for _ in range(20)))
    assert len({job.id for job in jobs}) == 1
    assert sum(not job.duplicate for job in jobs) == 1
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs") == 1


async def test_enqueue_many_folds_duplicates_inside_the_batch_and_of_existing_jobs(
    make_app: Callable[..., Akadze], database_url: str
) -> None:
    _, report = unique_app(make_app)
    existing = await report.enqueue(account=3)
    jobs = await report.enqueue_many(
        [{"account": 1}, {"account": 2}, {"account": 1}, {"account": 3}, {"account": 2, "note": ""}]
    )
    assert [job.duplicate for job in jobs] == [False, False, True, True, False]
    assert jobs[2].id == jobs[0].id and jobs[3].id == existing.id
    assert [job.args for job in jobs] == [
        {"account": 1},
        {"account": 2},
        {"account": 1},
        {"account": 3},
        {"account": 2, "note": ""},
    ]
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs") == 4


async def test_twenty_racing_batches_make_one_job_per_key(
    make_app: Callable[..., Akadze], database_url: str
) -> None:
    app = make_app(pool_size=20)

    @app.task("report", unique=Unique())
    async def report(account: int) -> None: ...

    batches = await asyncio.gather(
        *(report.enqueue_many([{"account": n % 3} for n in range(i, i + 6)]) for i in range(20))
    )
    for i, batch in enumerate(batches):
        assert [job.args["account"] for job in batch] == [n % 3 for n in range(i, i + 6)]
        # the batch's own repeats of a key come back as duplicates of its first item
        assert all(job.duplicate for job in batch[3:])
    ids = {job.args["account"]: job.id for batch in batches for job in batch}
    for batch in batches:
        for job in batch:
            assert job.id == ids[job.args["account"]]
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs") == 3


async def test_a_duplicate_of_an_uncommitted_job_waits_for_its_transaction(
    make_app: Callable[..., Akadze],
) -> None:
    """Decision (docs/flow-control.md): the second enqueue waits; it returns the job once the
    first transaction commits, and inserts its own if that transaction rolls back."""
    app, report = unique_app(make_app)
    engine: AsyncEngine = app.engine
    for outcome in ("commit", "rollback"):
        async with engine.connect() as conn:
            tx = await conn.begin()
            mine = await report.using(session=conn).enqueue(account=outcome == "commit")
            other = asyncio.create_task(report.enqueue(account=outcome == "commit"))
            await asyncio.sleep(0.3)
            assert not other.done()  # held by the open transaction
            if outcome == "commit":
                await tx.commit()
            else:
                await tx.rollback()
            job = await asyncio.wait_for(other, 10)
        if outcome == "commit":
            assert job.duplicate and job.id == mine.id
        else:
            assert not job.duplicate and job.id != mine.id


async def test_session_enqueues_in_one_transaction_make_one_job(make_app: Callable[..., Akadze]) -> None:
    app, report = unique_app(make_app)
    async with app.engine.begin() as conn:
        first = await report.using(session=conn).enqueue(account=1)
        second = await report.using(session=conn).enqueue(account=1)
    assert second.duplicate and second.id == first.id


async def test_a_retried_job_keeps_its_key(make_app: Callable[..., Akadze]) -> None:
    app = make_app()
    runs: list[int] = []

    @app.task("flaky", unique=Unique(), max_attempts=3)
    async def flaky(account: int) -> None:
        runs.append(account)
        raise Retry(timedelta(hours=1))

    first = await flaky.enqueue(account=1)
    await drain(app)
    assert runs == [1]
    again = await flaky.enqueue(account=1)
    assert again.duplicate and again.id == first.id and again.attempt == 1


async def test_requeue_of_a_failed_job_whose_key_a_newer_job_holds_is_a_clear_error(
    make_app: Callable[..., Akadze],
) -> None:
    app = make_app()

    @app.task("doomed", unique=Unique(), max_attempts=1)
    async def doomed(account: int) -> None:
        raise Fail("no")

    old = await doomed.enqueue(account=1)
    await drain(app)
    newer = await doomed.enqueue(account=1)
    assert not newer.duplicate
    async with app.engine.begin() as conn:
        with pytest.raises(UniqueConflictError) as caught:
            await requeue(conn, old.id)
        assert caught.value.job_id == old.id and caught.value.held_by == newer.id
        assert f"job {newer.id} holds its unique key" in str(caught.value)
    assert (await app.get_job(old.id)).state is JobState.FAILED  # type: ignore[union-attr]
    # once the newer job is gone from the blocking states, the requeue goes through
    async with app.engine.begin() as conn:
        await execute_cancel(conn, newer.id)
        requeued = await requeue(conn, old.id)
    assert requeued is not None and requeued.state is JobState.QUEUED


async def execute_cancel(conn: Any, job_id: int) -> None:
    from akadze import request_cancel

    assert await request_cancel(conn, job_id)


async def test_a_duplicate_never_runs_the_enqueue_hook(make_app: Callable[..., Akadze]) -> None:
    app, report = unique_app(make_app)
    seen: list[int] = []
    app.hooks.on_enqueue.append(lambda conn, job: seen.append(job.id))
    first = await report.enqueue(account=1)
    await report.enqueue(account=1)
    await report.enqueue_many([{"account": 1}, {"account": 2}])
    await wait_until(lambda: len(seen) == 2)
    assert seen[0] == first.id and len(seen) == 2


async def test_generated_clients_and_the_worker_side_make_one_job(
    make_app: Callable[..., Akadze], database_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The manifest records the option; the client computes the same key from the same JSON,
    so 20 racing producers, half of them generated clients, make one job."""
    import importlib
    import json
    import sys

    from akadze_codegen import generate
    from tests.apps.flow import create_app

    generate("tests.apps.flow:app", tmp_path / "flow_client")
    manifest = json.loads((tmp_path / "flow_client" / "_manifest.json").read_text())
    recorded = {task["name"]: task for task in manifest["tasks"]}
    assert recorded["flow.report"]["unique"] == {"args": ["account"], "states": ["queued", "running"]}
    assert recorded["flow.two"]["limit"] == {"concurrency": 2}
    # a fair share (Limit(key=...) alone): the key, and no ceiling
    assert recorded["flow.fair"]["limit"] == {"key": "tenant"}
    assert "unique" not in recorded["flow.two"]
    monkeypatch.syspath_prepend(str(tmp_path))
    client = importlib.import_module("flow_client").flow_report
    assert client.unique is not None
    app = create_app(database_url)
    worker_side = app.tasks["flow.report"]
    app_engine = make_app(pool_size=20).engine

    async def through_client(n: int) -> Any:
        async with app_engine.connect() as conn:
            job = await client.using(session=conn).enqueue(account=9, note=f"client {n}")
            await conn.commit()
        return job

    try:
        jobs = await asyncio.gather(
            *(through_client(n) for n in range(10)),
            *(worker_side.enqueue(account=9, note=f"worker {n}") for n in range(10)),
        )
    finally:
        await app.dispose()
        sys.modules.pop("flow_client", None)
    assert len({job.id for job in jobs}) == 1
    assert sum(not job.duplicate for job in jobs) == 1
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs") == 1


def test_codegen_diff_calls_a_changed_unique_breaking() -> None:
    from akadze_codegen import signature as ir
    from akadze_codegen.diff import diff

    def manifest(unique: ir.UniqueSpec | None) -> ir.Manifest:
        task = ir.TaskSignature(
            name="report",
            attr="report",
            client=None,
            queue="default",
            priority=0,
            max_attempts=3,
            args_fp="fp",
            params=[],
            unique=unique,
        )
        return ir.Manifest(format=ir.FORMAT, app="app:app", modules=[], tasks=[task], types=[])

    before = manifest(ir.UniqueSpec(args=["account"], states=["queued", "running"]))
    after = manifest(ir.UniqueSpec(args=None, states=["queued", "running"]))
    [change] = diff(before, after)
    assert change.verdict == "breaking" and "unique changed" in change.what
    assert diff(before, before) == []
    [added] = diff(manifest(None), before)
    assert added.verdict == "breaking"


def test_jobs_requeue_names_the_job_holding_the_key_and_exits_1(database_url: str) -> None:
    from typer.testing import CliRunner

    from akadze.cli import app as cli

    async def failed_and_newer() -> tuple[int, int]:
        app = Akadze(database_url=database_url)

        @app.task("doomed", unique=Unique(), max_attempts=1)
        async def doomed(account: int) -> None:
            raise Fail("no")

        try:
            old = await doomed.enqueue(account=1)
            await drain(app)
            newer = await doomed.enqueue(account=1)
        finally:
            await app.dispose()
        return old.id, newer.id

    old, newer = asyncio.run(failed_and_newer())
    result = CliRunner().invoke(
        cli, ["jobs", "requeue", str(old)], env={"AKADZE_DATABASE_URL": database_url, "AKADZE_APP": ""}
    )
    assert result.exit_code == 1, result.output
    assert f"job {old} was not requeued: job {newer} holds its unique key" in result.stderr
    assert result.stderr.count("\n") == 1


async def test_a_periodic_task_with_unique_does_not_pile_up_behind_itself(
    make_app: Callable[..., Akadze], database_url: str
) -> None:
    from datetime import UTC, datetime

    from akadze.worker.scheduler import backfill

    app = make_app()

    @app.periodic("tick", every=timedelta(minutes=1), unique=Unique())
    async def tick() -> None: ...

    jobs = await backfill(app, "tick", since=datetime.now(UTC) - timedelta(minutes=5))
    assert len(jobs) == 5  # five fire times, recorded
    assert len({job.id for job in jobs}) == 1  # one job: the later fires found it still queued
    assert [job.duplicate for job in jobs] == [False, True, True, True, True]
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs") == 1
    assert await fetchval(database_url, "SELECT count(DISTINCT job_id) FROM akadze_schedule_runs") == 1
