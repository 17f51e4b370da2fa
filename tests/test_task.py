"""Enqueue (single, batch, in the caller's transaction) and the argument codec on real rows."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections.abc import AsyncIterator, Callable
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any, Literal
from uuid import UUID

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncSession

from akadze import Akadze, JobState, Task
from akadze.errors import ConfigError
from akadze.testing import drain
from tests.support import fetchval, module_database, seconds_until_run


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


async def count_jobs(database_url: str) -> int:
    return int(await fetchval(database_url, "SELECT count(*) FROM akadze_jobs"))


@pytest.fixture
async def offline() -> AsyncIterator[Akadze]:
    """An app whose database cannot be reached: what it raises, it raises before any IO,
    so nothing can have been stored."""
    app = Akadze(database_url="postgresql://akadze@127.0.0.1:1/unreachable")
    yield app
    await app.dispose()


# -- enqueue in the caller's transaction ------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
async def test_a_job_enqueued_on_a_connection_lives_and_dies_with_its_transaction(
    app: Akadze, database_url: str, commit: bool
) -> None:
    @app.task("t")
    async def t(n: int) -> None: ...

    async with app.engine.connect() as conn:
        await conn.begin()
        job = await t.using(session=conn).enqueue(n=1)
        assert await count_jobs(database_url) == 0, "visible before the caller commits"
        await (conn.commit() if commit else conn.rollback())
    assert (await app.get_job(job.id) is not None) == commit
    assert await count_jobs(database_url) == (1 if commit else 0)


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "rollback"])
async def test_a_job_enqueued_on_a_session_lives_and_dies_with_its_transaction(
    app: Akadze, database_url: str, commit: bool
) -> None:
    @app.task("t")
    async def t(n: int) -> None: ...

    async with AsyncSession(app.engine) as session:
        await session.execute(text("CREATE TABLE side (n int)"))
        await session.execute(text("INSERT INTO side VALUES (1)"))
        jobs = await t.using(session=session).enqueue_many([{"n": 1}, {"n": 2}])
        await (session.commit() if commit else session.rollback())
    assert len(jobs) == 2
    assert await count_jobs(database_url) == (2 if commit else 0)


async def test_enqueue_returns_the_stored_job(app: Akadze) -> None:
    @app.task("mail.send", queue="mail", max_attempts=6, priority=3)
    async def send(user_id: int) -> None: ...

    job = await send.enqueue(user_id=5)
    assert job == await app.get_job(job.id)
    assert (job.task, job.queue, job.state, job.priority) == ("mail.send", "mail", JobState.QUEUED, 3)
    assert (job.attempt, job.max_attempts, job.args, job.errors) == (0, 6, {"user_id": 5}, ())


async def test_using_overrides_priority_queue_delay_and_expiry(app: Akadze, database_url: str) -> None:
    @app.task("t")
    async def t() -> None: ...

    expires = datetime.now(UTC) + timedelta(hours=2)
    job = await t.using(priority=9, queue="other", delay=timedelta(minutes=10), expires_at=expires).enqueue()
    assert (job.priority, job.queue, job.expires_at) == (9, "other", expires)
    assert 590 < await seconds_until_run(database_url, job.id) <= 600
    at = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert (await t.using(run_at=at).enqueue()).run_at == at


@pytest.mark.parametrize(
    "options",
    [
        {"delay": timedelta(seconds=-1)},
        {"delay": 5},
        {"run_at": datetime(2030, 1, 1)},
        {"expires_at": datetime(2030, 1, 1)},
        {"delay": timedelta(1), "run_at": datetime(2030, 1, 1, tzinfo=UTC)},
        {"priority": 2**31},
        {"queue": ""},
        {"session": "not a session"},
    ],
    ids=[
        "negative-delay",
        "delay-not-timedelta",
        "naive-run-at",
        "naive-expires-at",
        "delay-and-run-at",
        "priority-too-big",
        "empty-queue",
        "session-not-sqlalchemy",
    ],
)
async def test_bad_using_options_are_a_clear_config_error(offline: Akadze, options: dict[str, Any]) -> None:
    @offline.task("t")
    async def t() -> None: ...

    with pytest.raises(ConfigError):
        await t.using(**options).enqueue()


async def test_enqueue_many_is_one_statement_in_one_round_trip(app: Akadze, database_url: str) -> None:
    @app.task("t", priority=2)
    async def t(n: int) -> None: ...

    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(app.engine.sync_engine, "before_cursor_execute", record)
    async with app.engine.begin() as conn:
        jobs = await t.using(session=conn).enqueue_many({"n": n} for n in range(500))
    assert len(statements) == 1
    assert [job.args["n"] for job in jobs] == list(range(500))
    assert [job.id for job in jobs] == sorted(job.id for job in jobs)
    assert {job.priority for job in jobs} == {2}
    assert await count_jobs(database_url) == 500


async def test_enqueue_many_without_a_session_commits_at_once(app: Akadze, database_url: str) -> None:
    @app.task("t")
    async def t(n: int) -> None: ...

    jobs = await t.enqueue_many([{"n": 1}, {"n": 2}, {"n": 3}])
    assert [j.args for j in jobs] == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert await count_jobs(database_url) == 3
    assert await t.enqueue_many([]) == []


async def test_one_invalid_item_rejects_the_whole_batch(app: Akadze, database_url: str) -> None:
    @app.task("t")
    async def t(n: int) -> None: ...

    with pytest.raises(pydantic.ValidationError) as raised:
        await t.enqueue_many([{"n": 1}, {"n": "not a number"}, {"n": 3}])
    assert raised.value.errors()[0]["loc"] == ("n",)
    assert await count_jobs(database_url) == 0


@pytest.mark.parametrize(
    ("kwargs", "fields"),
    [
        ({}, {("user_id",)}),
        ({"user_id": "five"}, {("user_id",)}),
        ({"user_id": 5, "extra": 1}, {("extra",)}),
        ({"user_id": 5, "when": "yesterday"}, {("when",)}),
        ({"user_id": 5, "address": {"street": 1}}, {("address", "street")}),
    ],
    ids=["missing", "wrong-type", "unknown-name", "bad-datetime", "nested-field"],
)
async def test_invalid_arguments_raise_a_validation_error_naming_the_fields_before_any_io(
    offline: Akadze, kwargs: dict[str, Any], fields: set[tuple[str, ...]]
) -> None:
    @offline.task("t")
    async def t(user_id: int, when: datetime | None = None, address: Address | None = None) -> None: ...

    with pytest.raises(pydantic.ValidationError) as raised:
        await t.enqueue(**kwargs)
    assert {tuple(error["loc"]) for error in raised.value.errors()} == fields


async def test_invalid_arguments_store_nothing_even_in_the_callers_transaction(
    app: Akadze, database_url: str
) -> None:
    @app.task("t")
    async def t(user_id: int) -> None: ...

    async with app.engine.begin() as conn:
        await t.using(session=conn).enqueue(user_id=1)
        with pytest.raises(pydantic.ValidationError):
            await t.using(session=conn).enqueue(user_id="five")  # type: ignore[arg-type]
    assert await count_jobs(database_url) == 1


async def test_positional_arguments_are_stored_by_name(app: Akadze) -> None:
    @app.task("t")
    async def t(a: int, b: str = "x") -> None: ...

    job = await t.enqueue(1, b="y")  # type: ignore[call-arg]
    assert job.args == {"a": 1, "b": "y"}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("where", ["top-level", "in-a-list", "in-a-model"])
async def test_a_float_that_json_cannot_carry_is_refused_at_enqueue(
    offline: Akadze, value: float, where: str
) -> None:
    @offline.task("t")
    async def t(x: float = 0.0, xs: list[float] | None = None, point: Point | None = None) -> None: ...

    kwargs = {
        "top-level": {"x": value},
        "in-a-list": {"xs": [1.0, value]},
        "in-a-model": {"point": Point(1, value)},
    }
    with pytest.raises(ValueError, match="NaN or infinite"):
        await t.enqueue(**kwargs[where])


async def test_a_nul_character_is_refused_at_enqueue(app: Akadze, database_url: str) -> None:
    @app.task("t")
    async def t(s: str) -> None: ...

    with pytest.raises(ValueError, match="NUL"):
        await t.enqueue(s="a\x00b")
    assert await count_jobs(database_url) == 0


async def test_on_enqueue_hooks_run_in_the_enqueue_transaction_once_per_job(
    app: Akadze, database_url: str
) -> None:
    @app.task("t")
    async def t(n: int) -> None: ...

    async with app.engine.begin() as conn:
        await conn.execute(text("CREATE TABLE seen (job_id bigint)"))

    async def remember(conn: Any, job: Any) -> None:
        await conn.execute(text("INSERT INTO seen VALUES (:id)"), {"id": job.id})

    app.hooks.on_enqueue.append(remember)
    single = await t.enqueue(n=0)
    batch = await t.enqueue_many([{"n": 1}, {"n": 2}])
    async with app.engine.connect() as conn:
        await conn.begin()
        await t.using(session=conn).enqueue(n=3)
        await conn.rollback()
    seen = await fetchval(database_url, "SELECT array_agg(job_id ORDER BY job_id) FROM seen")
    assert seen == [single.id, *(j.id for j in batch)]


# -- rich types through a real row and a real run ---------------------------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Address(pydantic.BaseModel):
    street: str
    zip: str | None = None


class Customer(pydantic.BaseModel):
    name: str
    address: Address
    since: datetime
    tags: list[str] = []


@dataclasses.dataclass
class Point:
    x: int
    y: float
    label: str = "p"
    on: date | None = None


received: list[dict[str, Any]] = []


async def rich(
    customer: Customer,
    points: list[Point],
    aware: datetime,
    naive: datetime,
    day: date,
    clock: time,
    span: timedelta,
    ident: UUID,
    amount: Decimal,
    color: Color,
    level: Level,
    mode: Literal["fast", "slow"],
    maybe: int | None,
    pair: tuple[str, int],
    unique: set[int],
    by_key: dict[int, list[Point]],
    blob: bytes,
    flag: bool = True,
    note: str = "the default",
) -> None:
    received.append(dict(locals()))


offsets = st.builds(
    timezone, st.integers(min_value=-14 * 60, max_value=14 * 60).map(lambda m: timedelta(minutes=m))
)
finite = st.floats(allow_nan=False, allow_infinity=False)
texts = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)))
points = st.builds(
    Point, x=st.integers(-(2**63), 2**63 - 1), y=finite, label=texts, on=st.none() | st.dates()
)
customers = st.builds(
    Customer,
    name=texts,
    address=st.builds(Address, street=texts, zip=st.none() | texts),
    since=st.datetimes(timezones=offsets),
    tags=st.lists(texts, max_size=3),
)
rich_kwargs = st.fixed_dictionaries(
    {
        "customer": customers,
        "points": st.lists(points, max_size=3),
        "aware": st.datetimes(timezones=offsets),
        "naive": st.datetimes(),
        "day": st.dates(),
        "clock": st.times(timezones=st.none() | offsets),
        "span": st.timedeltas(),
        "ident": st.uuids(),
        "amount": st.decimals(allow_nan=False, allow_infinity=False),
        "color": st.sampled_from(Color),
        "level": st.sampled_from(Level),
        "mode": st.sampled_from(["fast", "slow"]),
        "maybe": st.none() | st.integers(),
        "pair": st.tuples(texts, st.integers(-(2**63), 2**63 - 1)),
        "unique": st.sets(st.integers(-1000, 1000), max_size=5),
        "by_key": st.dictionaries(st.integers(-(2**31), 2**31), st.lists(points, max_size=2), max_size=3),
        "blob": st.binary(max_size=20),
    },
    optional={"flag": st.booleans(), "note": texts},
)


async def _round_trip(app: Akadze, task: Task[..., None], kwargs: dict[str, Any]) -> None:
    job = await task.enqueue(**kwargs)
    received.clear()
    assert await drain(app) == 1
    after = await app.get_job(job.id)
    assert after is not None
    assert after.state is JobState.SUCCEEDED, after.errors
    [got] = received
    expected = {"flag": True, "note": "the default", **kwargs}
    for name, value in expected.items():
        assert got[name] == value, name
        assert type(got[name]) is type(value), name
    assert all(type(p) is Point for p in got["points"])
    assert type(got["customer"].address) is Address
    assert got["aware"].utcoffset() == kwargs["aware"].utcoffset()
    assert got["naive"].tzinfo is None
    assert all(type(key) is int for key in got["by_key"])


def test_rich_arguments_arrive_in_the_task_as_the_declared_types(database_url: str) -> None:
    """Each example is enqueued as a real row and run by the real worker code (drain)."""
    with asyncio.Runner() as runner:
        app = Akadze(database_url=database_url)
        task = app.register(rich, name="rich")

        @settings(max_examples=75, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(kwargs=rich_kwargs)
        def round_trip(kwargs: dict[str, Any]) -> None:
            runner.run(_round_trip(app, task, kwargs))

        try:
            round_trip()
        finally:
            runner.run(app.dispose())


async def test_an_omitted_argument_takes_the_default_the_worker_has_at_run_time(
    make_app: Callable[..., Akadze],
) -> None:
    producer = make_app()

    @producer.task("greet")
    async def old(name: str, greeting: str = "hello") -> str:
        return f"{greeting} {name}"

    job = await old.enqueue(name="ann")
    assert job.args == {"name": "ann"}
    worker_app = make_app()

    @worker_app.task("greet")
    async def new(name: str, greeting: str = "hi") -> str:
        return f"{greeting} {name}"

    await drain(worker_app)
    after = await worker_app.get_job(job.id)
    assert after is not None
    assert after.result == "hi ann"
