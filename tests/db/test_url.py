"""asyncpg_dsn: the DSN the heartbeat process connects with keeps where the server is."""

from __future__ import annotations

import asyncpg
from sqlalchemy.engine import make_url

from akadze.db.url import asyncpg_dsn


def test_a_unix_socket_directory_in_the_query_is_kept() -> None:
    # the embedded server's URL form; without its host the heartbeat process reached another
    # server (InvalidCatalogNameError for the test's database)
    dsn = asyncpg_dsn(make_url("postgresql+asyncpg://postgres@/postgres?host=/run/akadze-x&sslmode=disable"))
    assert dsn.startswith("postgresql://postgres@/postgres?")
    assert dict(make_url(dsn).query) == {"host": "/run/akadze-x", "sslmode": "disable"}


async def test_the_heartbeat_dsn_reaches_the_tests_own_database(database_url: str) -> None:
    conn = await asyncpg.connect(asyncpg_dsn(make_url(database_url)))
    try:
        assert await conn.fetchval("SELECT current_database()") == make_url(database_url).database
    finally:
        await conn.close()
