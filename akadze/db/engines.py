"""The engines an app connects with: the primary's, which takes every write, and optionally a
read replica's, which serves what only reads (listings, ``jobs explain``, the dashboard's
pages, the metrics gauges) so that those reads do not load the server that claims.

Both are built here from URLs (akadze.db.url reads them, several hosts included) or given as
the caller's own engines; akadze disposes only the ones it built.
"""

from __future__ import annotations

from uuid import uuid4

import msgspec
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from akadze.db.raw import drop_closed
from akadze.db.url import check_url, for_writes, parse_url, with_libpq_params
from akadze.errors import ConfigError

DEFAULT_POOL_SIZE = 5
MAX_OVERFLOW = 10
#: asyncpg announces client_encoding as 'utf-8', the server reports UTF8: PgBouncer then sends a
#: SET before each transaction it hands over (an extra round trip); spelled UTF8, none (scaling.md)
SERVER_SETTINGS = {"client_encoding": "UTF8"}


def normalize_url(url: str, *, writes: bool = True) -> str:
    """Accept postgresql://, postgres:// and postgresql+asyncpg://; asyncpg is the driver.

    Several hosts (``h1:5432,h2:5433``) are moved to the query, where SQLAlchemy and asyncpg
    read them (akadze.db.url); with ``writes`` such a URL that names no
    ``target_session_attrs`` gets ``read-write``, so that its connections skip standbys.
    """
    parsed = parse_url(url)
    if parsed.drivername in ("postgresql", "postgres", "postgresql+asyncpg"):
        parsed = check_url(parsed.set(drivername="postgresql+asyncpg"))
        return (for_writes(parsed) if writes else parsed).render_as_string(hide_password=False)
    raise ConfigError(
        f"database_url uses {parsed.drivername!r}; akadze needs PostgreSQL through asyncpg "
        "(postgresql:// or postgresql+asyncpg://)"
    )


def create_engine(
    url: str, *, pool_size: int = DEFAULT_POOL_SIZE, prepared_statements: bool = False, writes: bool = True
) -> AsyncEngine:
    """An engine safe behind a pooler in transaction mode: no prepared statement is kept.

    ``prepared_statements=True`` keeps asyncpg's and SQLAlchemy's statement caches (their
    defaults): one round trip per statement instead of two, and plans reused. Only for a direct
    connection or a pooler in session mode. ``writes=False`` for a replica's engine: a URL of
    several hosts then keeps its own ``target_session_attrs`` (any, unless it names one).
    """
    engine = create_async_engine(
        normalize_url(url, writes=writes),
        pool_size=pool_size,
        max_overflow=MAX_OVERFLOW,
        json_deserializer=msgspec.json.decode,
        # statement parameters hold task arguments: keep them out of SQLAlchemy's logs and errors
        hide_parameters=True,
        connect_args={"server_settings": dict(SERVER_SETTINGS)}
        if prepared_statements
        else {
            "statement_cache_size": 0,
            "prepared_statement_cache_size": 0,
            "prepared_statement_name_func": lambda: f"__akadze_{uuid4().hex}__",
            "server_settings": dict(SERVER_SETTINGS),
        },
    )
    # libpq parameters in the URL (sslmode, application_name...) are mapped at each connect;
    # a pooled connection whose server went away is replaced at checkout (a failover)
    return drop_closed(with_libpq_params(engine))


def read_engine_for(
    read_database_url: str | None,
    read_engine: AsyncEngine | None,
    *,
    pool_size: int,
    prepared_statements: bool,
) -> tuple[AsyncEngine | None, bool]:
    """The replica's engine an app reads from, and whether the app owns it (built it from
    ``read_database_url``); (None, False) when neither is given: reads go to the primary."""
    if read_database_url is not None and read_engine is not None:
        raise ConfigError("pass at most one of read_database_url or read_engine")
    if read_engine is not None:
        if not isinstance(read_engine, AsyncEngine):
            raise ConfigError(
                f"read_engine must be a SQLAlchemy AsyncEngine, got {type(read_engine).__qualname__}"
            )
        return read_engine, False
    if read_database_url is None:
        return None, False
    if not isinstance(read_database_url, str):
        raise ConfigError(
            f"read_database_url must be a URL string, got {type(read_database_url).__qualname__}"
        )
    try:
        engine = create_engine(
            read_database_url, pool_size=pool_size, prepared_statements=prepared_statements, writes=False
        )
    except ConfigError as exc:
        # the URL readers say database_url; this one is the replica's
        raise ConfigError(str(exc).replace("database_url", "read_database_url", 1)) from None
    return engine, True
