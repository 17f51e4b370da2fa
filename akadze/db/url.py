"""Database URLs: the libpq parameters people put in them, mapped onto what asyncpg takes.

A URL copied from another tool often carries libpq's parameters (``?sslmode=require``,
``sslrootcert=``, ``application_name=``, ``options=-c search_path=app``). SQLAlchemy hands a
URL's query to ``asyncpg.connect()`` as keyword arguments, which refuses them. Here they leave
the keyword arguments before each connect and travel in a ``dsn`` of their own, which asyncpg
reads as libpq does (TLS modes and files; other parameters are startup settings, as
``application_name`` and ``options`` are for libpq); ``connect_timeout`` becomes ``timeout``.
The engine's URL keeps them, so every connection built from it (the heartbeat's) has them too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import event
from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import AsyncEngine

from akadze.errors import ConfigError

SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")

#: libpq parameters that asyncpg reads from a DSN itself
_DSN_PARAMS = frozenset(
    {
        "sslmode",
        "sslrootcert",
        "sslcert",
        "sslkey",
        "sslcrl",
        "sslpassword",
        "sslnegotiation",
        "ssl_min_protocol_version",
        "ssl_max_protocol_version",
        "target_session_attrs",
        "krbsrvname",
        "gsslib",
    }
)
#: libpq parameters sent to the server at connect, as libpq sends them
_STARTUP_PARAMS = frozenset({"application_name", "options"})

LIBPQ_PARAMS = _DSN_PARAMS | _STARTUP_PARAMS | {"connect_timeout"}
#: where the server is, when the URL's query says it (SQLAlchemy passes these to asyncpg itself)
_SERVER_PARAMS = frozenset({"host", "port"})


def check_url(url: URL) -> URL:
    """ConfigError for what would only fail at connect: a port that is not a number from 1 to
    65535, an unknown sslmode, a connect_timeout that is not a number. ``url`` otherwise."""
    if url.port is not None and not 1 <= url.port <= 65535:
        raise ConfigError(f"database_url: the port of host {url.host!r} must be a number from 1 to 65535")
    query = libpq_query(url)
    if "sslmode" in query and query["sslmode"] not in SSLMODES:
        raise ConfigError(f"database_url: sslmode={query['sslmode']!r} is not one of {', '.join(SSLMODES)}")
    if "connect_timeout" in query:
        try:
            float(query["connect_timeout"])
        except ValueError:
            raise ConfigError(
                f"database_url: connect_timeout={query['connect_timeout']!r} is not a number of seconds"
            ) from None
    return url


def libpq_query(url: URL) -> dict[str, str]:
    """The URL's libpq parameters (the last value of a repeated one)."""
    found: dict[str, str] = {}
    for key, value in url.query.items():
        if key in LIBPQ_PARAMS:
            found[key] = value if isinstance(value, str) else value[-1]
    return found


def connect_params(libpq: Mapping[str, Any]) -> dict[str, Any]:
    """``asyncpg.connect()`` keyword arguments that carry libpq parameters."""
    params: dict[str, Any] = {}
    in_dsn = {key: value for key, value in libpq.items() if key != "connect_timeout"}
    if in_dsn:
        params["dsn"] = "postgresql://?" + urlencode(in_dsn)
    if "connect_timeout" in libpq:
        params["timeout"] = float(libpq["connect_timeout"])
    return params


def with_libpq_params(engine: AsyncEngine) -> AsyncEngine:
    """Let ``engine`` connect with the libpq parameters of its URL; returns it."""

    @event.listens_for(engine.sync_engine, "do_connect")
    def _libpq(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
        libpq = {key: cparams.pop(key) for key in list(cparams) if key in LIBPQ_PARAMS}
        if libpq:
            cparams.update(connect_params({k: v if isinstance(v, str) else v[-1] for k, v in libpq.items()}))

    return engine


def asyncpg_dsn(url: URL) -> str:
    """A DSN that ``asyncpg.connect()`` reads alone: the URL's server, credentials, database
    and libpq parameters (for a process that does not load SQLAlchemy). Holds the password."""
    keep: dict[str, str | tuple[str, ...]] = {
        key: value for key, value in libpq_query(url).items() if key != "connect_timeout"
    }
    # a unix socket directory (the embedded server's ``?host=/tmp/...``) or hosts and ports
    # given in the query, which asyncpg's DSN reads as libpq does
    keep.update({key: value for key, value in url.query.items() if key in _SERVER_PARAMS})
    return url.set(drivername="postgresql", query=keep).render_as_string(hide_password=False)
