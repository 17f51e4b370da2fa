"""Akadze(...): configuration errors, engine ownership, the task registry, include(), hooks."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from akadze import Akadze, current
from akadze.errors import (
    AkadzeError,
    ConfigError,
    DuplicateTaskError,
    MissingRegisterError,
    NotInRunError,
    UnknownTaskError,
)
from akadze.testing import drain
from tests.support import module_database


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


URL = "postgresql://akadze:secret@localhost:5432/akadze"


def test_without_a_url_the_app_reads_akadze_database_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/install.md exports AKADZE_DATABASE_URL; ``Akadze()`` takes it (issue 33)."""
    monkeypatch.setenv("AKADZE_DATABASE_URL", URL)
    app = Akadze()
    assert (app.engine.url.host, app.engine.url.database, app.owns_engine) == ("localhost", "akadze", True)
    monkeypatch.setenv("AKADZE_DATABASE_URL", "")
    with pytest.raises(ConfigError, match="pass database_url or engine, or set AKADZE_DATABASE_URL"):
        Akadze()
    monkeypatch.delenv("AKADZE_DATABASE_URL")
    with pytest.raises(ConfigError, match="pass database_url or engine, or set AKADZE_DATABASE_URL"):
        Akadze()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"database_url": URL, "engine": "engine"}, "exactly one of database_url or engine"),
        ({"database_url": "mysql://x@localhost/db"}, "PostgreSQL"),
        ({"database_url": "not a url at all"}, "not a valid URL"),
        ({"database_url": URL, "pool_size": 0}, "pool_size"),
        ({"database_url": URL, "pool_size": True}, "pool_size"),
        ({"database_url": URL, "grace": timedelta(0)}, "grace"),
        ({"database_url": URL, "retention": timedelta(seconds=-1)}, "retention"),
        ({"database_url": URL, "retention": 7}, "retention"),
        ({"database_url": URL, "grace": timedelta(days=8)}, "shorter than retention"),
        ({"engine": "not an engine"}, "AsyncEngine"),
        ({"database_url": URL, "read_database_url": URL, "read_engine": "e"}, "at most one of read_"),
        ({"database_url": URL, "read_engine": "not an engine"}, "read_engine must be a SQLAlchemy"),
        (
            {"database_url": URL, "read_database_url": "postgresql://u@h1:1,h2:x/db"},
            "read_database_url: the port",
        ),
    ],
    ids=[
        "both-url-and-engine",
        "not-postgres",
        "garbage-url",
        "pool-size-zero",
        "pool-size-bool",
        "grace-zero",
        "retention-negative",
        "retention-not-timedelta",
        "grace-not-shorter-than-retention",
        "engine-of-the-wrong-type",
        "both-read-url-and-read-engine",
        "read-engine-of-the-wrong-type",
        "bad-read-url",
    ],
)
def test_bad_configuration_is_a_clear_value_error(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as raised:
        Akadze(**kwargs)
    assert isinstance(raised.value, ValueError)
    assert isinstance(raised.value, AkadzeError)


async def test_pool_size_with_a_borrowed_engine_is_a_config_error() -> None:
    engine = create_async_engine("postgresql+asyncpg://x@localhost/db")
    try:
        with pytest.raises(ConfigError, match="pool_size"):
            Akadze(engine=engine, pool_size=3)
    finally:
        await engine.dispose()


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "postgresql+asyncpg"])
async def test_the_plain_and_the_driver_url_forms_are_accepted(scheme: str) -> None:
    app = Akadze(database_url=f"{scheme}://akadze:secret@localhost:5432/akadze", pool_size=7)
    try:
        assert app.engine.url.drivername == "postgresql+asyncpg"
        assert app.engine.url.password == "secret"
        assert app.engine.pool.size() == 7  # type: ignore[attr-defined]
        assert app.owns_engine
    finally:
        await app.dispose()


async def test_the_app_owns_and_disposes_its_engine_but_never_a_borrowed_one(database_url: str) -> None:
    borrowed = create_async_engine(database_url.replace("postgresql://", "postgresql+asyncpg://"))
    try:
        async with Akadze(engine=borrowed) as app:
            assert not app.owns_engine
            assert app.engine is borrowed
        async with borrowed.connect() as conn:
            assert await conn.scalar(text("SELECT 1")) == 1
    finally:
        await borrowed.dispose()


async def test_without_a_replica_reads_go_to_the_apps_own_engine(database_url: str) -> None:
    async with Akadze(database_url=database_url) as app:
        assert app.read_engine is app.engine


async def test_a_replica_engine_is_owned_when_built_from_a_url_and_never_when_borrowed(
    database_url: str,
) -> None:
    servers = "postgresql://u@h1:5432,h2:5433/db"
    replica = Akadze(database_url=servers, read_database_url=servers)
    # a replica's URL of several hosts keeps its own choice of server (any, unless it says)
    assert "target_session_attrs" not in replica.read_engine.url.query
    assert replica.engine.url.query["target_session_attrs"] == "read-write"
    await replica.dispose()
    borrowed = create_async_engine(database_url.replace("postgresql://", "postgresql+asyncpg://"))
    try:
        async with Akadze(database_url=database_url, read_engine=borrowed) as app:
            assert app.read_engine is borrowed and app.engine is not borrowed
            async with app.read_engine.connect() as conn:
                assert await conn.scalar(text("SELECT 1")) == 1
        async with borrowed.connect() as conn:  # not disposed with the app
            assert await conn.scalar(text("SELECT 1")) == 1
    finally:
        await borrowed.dispose()


async def test_the_engine_keeps_no_prepared_statements(app: Akadze) -> None:
    """So a pooler in transaction mode may stand in front of the database."""
    async with app.engine.connect() as conn:
        for _ in range(3):
            await conn.execute(text("SELECT 1"))
        kept = (await conn.execute(text("SELECT statement FROM pg_prepared_statements"))).scalars().all()
    # only the statement reading the view is prepared while it runs
    assert kept == ["SELECT statement FROM pg_prepared_statements"]


async def test_prepared_statements_keeps_the_engines_statement_caches(
    make_app: Callable[..., Akadze],
) -> None:
    """Opt-in: SQLAlchemy's statements (hooks, complete_tx, yours) are prepared and kept too."""
    for prepared in (False, True):
        app = make_app(prepared_statements=prepared)
        async with app.engine.connect() as conn:
            for _ in range(2):
                await conn.execute(text("SELECT 41 + 1"))
            kept = (await conn.execute(text("SELECT statement FROM pg_prepared_statements"))).scalars().all()
        assert ("SELECT 41 + 1" in kept) is prepared, kept


async def test_akadze_prepares_its_own_statements_on_a_direct_connection_only(
    make_app: Callable[..., Akadze], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One round trip per statement where no pooler stands in between; nothing prepared behind
    one (a pooler answers with key data of its own, so the pid differs from pg_backend_pid())."""
    import asyncpg

    for behind_a_pooler in (False, True):
        if behind_a_pooler:
            monkeypatch.setattr(asyncpg.Connection, "get_server_pid", lambda self: -1)
        app = make_app()

        @app.task("t.add")
        async def add(x: int) -> int:
            return x + 1

        jobs = [await add.enqueue(x=i) for i in range(3)]
        assert await drain(app) == 3
        assert [(await app.get_job(j.id)).result for j in jobs] == [1, 2, 3]  # type: ignore[union-attr]
        async with app.raw_connections.connection() as conn:
            kept = [r["name"] for r in await conn.fetch("SELECT name FROM pg_prepared_statements")]
        mine = [name for name in kept if name.startswith("__akadze_enqueue_now_")]
        assert bool(mine) is not behind_a_pooler, kept


async def test_a_prepared_statement_gone_stale_is_prepared_again(app: Akadze) -> None:
    @app.task("t.noop")
    async def noop() -> None: ...

    await noop.enqueue()
    async with app.raw_connections.connection() as conn:
        await conn.execute("DEALLOCATE ALL")  # as a DISCARD ALL would
    await noop.enqueue()  # the statement is gone: it runs unprepared, and is prepared again
    await noop.enqueue()
    async with app.raw_connections.connection() as conn:
        kept = [r["name"] for r in await conn.fetch("SELECT name FROM pg_prepared_statements")]
    assert any(name.startswith("__akadze_enqueue_now_") for name in kept), kept
    assert await drain(app) == 3


async def test_prepared_statements_is_for_the_engine_the_app_creates() -> None:
    borrowed = create_async_engine("postgresql+asyncpg://u@localhost/db")
    try:
        with pytest.raises(ConfigError, match="prepared_statements applies to the engine created"):
            Akadze(engine=borrowed, prepared_statements=True)
    finally:
        await borrowed.dispose()
    with pytest.raises(ConfigError, match="prepared_statements must be True or False"):
        Akadze(URL, prepared_statements="yes")  # type: ignore[arg-type]


async def test_a_task_is_registered_with_its_options(app: Akadze) -> None:
    @app.task("mail.send", queue="mail", max_attempts=6, timeout=timedelta(seconds=60), priority=-2)
    async def send(user_id: int) -> None: ...

    assert app.get_task("mail.send") is send
    assert send.name == "mail.send"
    assert (send.queue, send.options.max_attempts, send.options.priority) == ("mail", 6, -2)
    assert send.options.timeout == timedelta(seconds=60)
    assert send.is_async
    assert app.queues() == ["mail"]


async def test_a_task_can_still_be_called_in_process(app: Akadze) -> None:
    @app.task("add")
    def add(a: int, b: int) -> int:
        return a + b

    assert add(2, 3) == 5
    assert not add.is_async


async def test_register_takes_a_closure_and_the_same_options(app: Akadze) -> None:
    greeting = "hi"

    async def _hello(name: str) -> str:
        return f"{greeting} {name}"

    task = app.register(_hello, name="hello", queue="q", max_attempts=2)
    assert app.tasks == {"hello": task}
    assert (task.queue, task.options.max_attempts) == ("q", 2)
    assert await task("ann") == "hi ann"


@pytest.mark.parametrize("second", ["decorator", "register"])
def test_a_duplicate_task_name_is_a_clear_error(second: str) -> None:
    app = Akadze(database_url=URL)

    @app.task("mail.send")
    async def send() -> None: ...

    with pytest.raises(DuplicateTaskError, match=r"'mail\.send' is already registered") as raised:
        if second == "decorator":

            @app.task("mail.send")
            async def again() -> None: ...
        else:
            app.register(send.fn, name="mail.send")
    assert raised.value.task_name == "mail.send"
    assert isinstance(raised.value, ValueError)
    assert app.tasks["mail.send"] is send


async def _async_policy(attempt: int) -> timedelta:
    return timedelta(seconds=attempt)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": 1.5}, "max_attempts"),
        ({"timeout": timedelta(0)}, "timeout"),
        ({"timeout": 5}, "timeout"),
        ({"priority": 2**31}, "priority"),
        ({"queue": ""}, "queue name"),
        ({"backoff": _async_policy}, "plain"),
        ({"backoff": "fast"}, "backoff"),
    ],
    ids=[
        "no-attempts",
        "fractional-attempts",
        "zero-timeout",
        "timeout-not-timedelta",
        "priority-too-big",
        "empty-queue",
        "async-backoff",
        "backoff-not-callable",
    ],
)
def test_bad_task_options_are_a_clear_config_error(options: dict[str, Any], message: str) -> None:
    app = Akadze(database_url=URL)
    with pytest.raises(ConfigError, match=message):

        @app.task("t", **options)
        async def t() -> None: ...

    assert app.tasks == {}


@pytest.mark.parametrize(
    "name", ["", "   ", "x" * 201, "a\x00b", 5], ids=["empty", "blank", "long", "nul", "int"]
)
def test_a_bad_task_name_is_a_clear_config_error(name: Any) -> None:
    app = Akadze(database_url=URL)
    with pytest.raises(ConfigError, match="task name"):
        app.task(name)


def _star_args(*numbers: int) -> None: ...


def _star_kwargs(**options: int) -> None: ...


def _positional_only(a: int, /) -> None: ...


def _unresolvable(a: NoSuchType) -> None: ...  # type: ignore[name-defined]  # noqa: F821


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (_star_args, r"\*args and \*\*kwargs"),
        (_star_kwargs, r"\*args and \*\*kwargs"),
        (_positional_only, "positional-only"),
        (_unresolvable, "cannot resolve the type hints"),
    ],
    ids=["star-args", "star-kwargs", "positional-only", "unresolvable-annotation"],
)
def test_a_signature_that_cannot_be_stored_is_a_clear_config_error(
    fn: Callable[..., Any], message: str
) -> None:
    app = Akadze(database_url=URL)
    with pytest.raises(ConfigError, match=message):
        app.register(fn, name="t")
    assert app.tasks == {}


def test_a_sync_task_with_a_timeout_warns_on_the_app_logger(caplog: pytest.LogCaptureFixture) -> None:
    app = Akadze(database_url=URL)
    caplog.set_level(logging.DEBUG, logger="akadze.app")

    @app.task("sync", timeout=timedelta(seconds=1))
    def sync() -> None: ...

    @app.task("sync.no-timeout")
    def sync_without() -> None: ...

    @app.task("async", timeout=timedelta(seconds=1))
    async def asynchronous() -> None: ...

    warnings = [r for r in caplog.records if r.name == "akadze.app" and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "'sync'" in warnings[0].getMessage()
    assert "does not stop its thread" in warnings[0].getMessage()


def test_include_calls_the_modules_register_and_remembers_the_module() -> None:
    app = Akadze(database_url=URL)
    app.include("tests.apps.greetings")
    app.include("tests.apps.greetings")
    task = app.get_task("greetings.hello")
    assert task.module == "tests.apps.greetings"
    assert app.included == ["tests.apps.greetings"]
    assert list(app.tasks) == ["greetings.hello"]


def test_include_of_a_module_without_register_names_the_module() -> None:
    app = Akadze(database_url=URL)
    with pytest.raises(
        MissingRegisterError, match=r"module 'tests.apps.no_register' has no register\(app\)"
    ) as raised:
        app.include("tests.apps.no_register")
    assert raised.value.module == "tests.apps.no_register"
    assert isinstance(raised.value, ImportError)
    assert app.included == []


def test_include_of_a_missing_module_is_an_import_error() -> None:
    app = Akadze(database_url=URL)
    with pytest.raises(ImportError, match=r"tests\.apps\.does_not_exist"):
        app.include("tests.apps.does_not_exist")


def test_a_duplicate_name_across_included_modules_is_a_clear_error() -> None:
    app = Akadze(database_url=URL)

    @app.task("greetings.hello")
    async def mine(name: str) -> None: ...

    with pytest.raises(DuplicateTaskError, match=r"greetings\.hello"):
        app.include("tests.apps.greetings")
    assert app.included == []


def test_an_unknown_task_is_a_lookup_error_naming_it() -> None:
    app = Akadze(database_url=URL)
    with pytest.raises(UnknownTaskError, match="'nope'") as raised:
        app.get_task("nope")
    assert isinstance(raised.value, LookupError)


def test_current_outside_a_run_is_a_clear_error() -> None:
    with pytest.raises(NotInRunError, match="inside a running task") as raised:
        current()
    assert isinstance(raised.value, RuntimeError)


def test_hooks_are_four_lists_that_start_empty() -> None:
    app = Akadze(database_url=URL)
    assert app.hooks.on_enqueue == []
    assert app.hooks.before_run == []
    assert app.hooks.after_run == []
    assert app.hooks.on_transition == []


def test_the_repr_never_shows_the_password() -> None:
    assert "secret" not in repr(Akadze(database_url=URL))
