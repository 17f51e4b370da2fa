"""Test fixtures: a real PostgreSQL, a migrated template database, one clone per test.

The server is AKADZE_TEST_DATABASE_URL when set (scripts/test sets it, starting an embedded
PostgreSQL when nothing is configured); otherwise an embedded one is started here.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from akadze import Akadze
from akadze.app import normalize_url


def _import_anyio_now() -> None:
    """Resolve every lazily imported name of anyio here, in the main thread, at startup.

    anyio imports its parts on first use, and pytest rewrites the asserts of a plugin's modules
    (anyio is one) with ast.parse as they are imported. On CPython 3.11 the AST constructor's
    recursion counter is not safe across threads (python/cpython#106905): a first use inside a
    test, while another thread parses or compiles (a sync task's thread, the events thread),
    failed once with "SystemError: AST constructor recursion depth mismatch" in a full run
    (Starlette's FileResponse reaching anyio.open_file). Nothing of akadze is involved.
    """
    import anyio

    for name in dir(anyio):
        getattr(anyio, name, None)


_import_anyio_now()


def _plain(url: str) -> str:
    """An asyncpg DSN (postgresql://...) for admin connections."""
    return make_url(normalize_url(url)).set(drivername="postgresql").render_as_string(hide_password=False)


def with_database(url: str, name: str) -> str:
    return make_url(normalize_url(url)).set(database=name).render_as_string(hide_password=False)


async def _admin(url: str, *statements: str) -> None:
    conn = await asyncpg.connect(_plain(url))
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    configured = os.environ.get("AKADZE_TEST_DATABASE_URL")
    if configured:
        yield normalize_url(configured)
        return
    from akadze import embedded

    folder = tempfile.mkdtemp(prefix="akadze-test-pg-")
    pgdata = os.path.join(folder, "pgdata")
    url = embedded.start(embedded.Path(pgdata))
    os.environ["AKADZE_TEST_DATABASE_URL"] = url
    try:
        yield normalize_url(url)
    finally:
        embedded.stop(embedded.Path(pgdata))
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def akadze_server_url(server_url: str) -> str:
    """The plugin's server (akadze.testing.plugin) is this suite's: one template per session."""
    return server_url


@pytest.fixture(scope="session")
def template_db(akadze_template_database: str) -> str:
    """A migrated database that every test's database is cloned from: the pytest plugin's
    template (docs/testing.md), which this suite uses as its users do."""
    return akadze_template_database


_counter = itertools.count()


@pytest.fixture
def database_url(server_url: str, template_db: str) -> Iterator[str]:
    """A fresh, migrated database for this test (a clone of the template)."""
    name = f"akadze_t_{os.getpid()}_{next(_counter)}"
    asyncio.run(_admin(server_url, f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"'))
    yield with_database(server_url, name)
    asyncio.run(_admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
async def make_app(database_url: str) -> AsyncIterator[Callable[..., Akadze]]:
    """A factory of apps on this test's database; every app made is disposed at the end."""
    made: list[Akadze] = []

    def factory(**options: Any) -> Akadze:
        app = Akadze(database_url=database_url, **options)
        made.append(app)
        return app

    yield factory
    for app in made:
        await app.dispose()


@pytest.fixture
async def app(make_app: Callable[..., Akadze]) -> Akadze:
    return make_app()


async def wait_until(
    predicate: Callable[[], Awaitable[bool] | bool],
    *,
    timeout: float = 10.0,
    interval: float = 0.02,
) -> None:
    """Wait for a condition without a bare sleep; fails the test on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        outcome = predicate()
        if not isinstance(outcome, bool):
            outcome = await outcome
        if outcome:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)


@pytest.fixture(autouse=True)
def _logging_left_as_found() -> Iterator[None]:
    """A test that runs ``akadze worker`` in process calls akadze.events.logs.configure(): the root
    logger at INFO, with a handler on the stderr of that moment (a CLI runner's, closed when
    the command returns). Left there, every later log line of the session fails on the closed
    stream ("--- Logging error ---" in CI's output). Undone after each test."""
    root = logging.getLogger()
    before, level = set(root.handlers), root.level
    tracebacks = logging.getLogger("akadze.worker.traceback")
    tracebacks_level = tracebacks.level
    yield
    for handler in list(root.handlers):
        if handler not in before and type(handler) is logging.StreamHandler:
            root.removeHandler(handler)
    root.setLevel(level)
    tracebacks.setLevel(tracebacks_level)
