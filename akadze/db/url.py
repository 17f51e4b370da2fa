"""Database URLs: the libpq parameters people put in them, mapped onto what asyncpg takes.

A URL copied from another tool often carries libpq's parameters (``?sslmode=require``,
``sslrootcert=``, ``application_name=``, ``options=-c search_path=app``). SQLAlchemy hands a
URL's query to ``asyncpg.connect()`` as keyword arguments, which refuses them. Here they leave
the keyword arguments before each connect and travel in a ``dsn`` of their own, which asyncpg
reads as libpq does (TLS modes and files; other parameters are startup settings, as
``application_name`` and ``options`` are for libpq); ``connect_timeout`` becomes ``timeout``.
The engine's URL keeps them, so every connection built from it (the heartbeat's) has them too.

Several servers (a primary and its standbys) are written as libpq writes them:
``postgresql://h1:5432,h2:5433/db?target_session_attrs=read-write``, or ``?host=h1,h2&port=5432,5433``.
SQLAlchemy's URL parser reads the first form's port as "5432,h2:5433" and refuses it; here
every form becomes ``?host=h1,h2&port=5432,5433`` (each host with its port, 5432 where none
was given), which SQLAlchemy hands to asyncpg as lists and asyncpg's DSN parser reads as well.
asyncpg then tries the hosts in order at each connect and keeps the first that matches
``target_session_attrs``: after a failover, the next connection finds the new primary.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlencode

from sqlalchemy import event
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine

from akadze.db import hosts
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
_KEYWORD_PARAMS = frozenset({"connect_timeout", "target_session_attrs"})
#: where the server is, when the URL's query says it (SQLAlchemy passes these to asyncpg itself)
_SERVER_PARAMS = frozenset({"host", "port"})
#: what libpq and asyncpg take for target_session_attrs
SESSION_ATTRS = ("any", "read-write", "read-only", "primary", "standby", "prefer-standby")
#: the port of a host listed without one (libpq's)
DEFAULT_PORT = 5432

#: scheme, user and password as SQLAlchemy's parser reads them, then the hosts up to the path
_AUTHORITY = re.compile(r"^(?P<head>[\w+]+://(?:[^:/]*(?::[^@]*)?@)?)(?P<hosts>[^/?]*)(?P<tail>.*)$", re.S)


def parse_url(text: str) -> URL:
    """``text`` as a SQLAlchemy URL, with several hosts (in the authority or in ``host=``)
    moved to the query as ``host=h1,h2&port=p1,p2``.

    Raises ConfigError for a URL that cannot be read (never quoting it: it may hold a password).
    """
    match = _AUTHORITY.match(text)
    listed = match is not None and "," in match["hosts"]
    if match is not None and listed:
        text = match["head"] + match["tail"]
    try:
        url = make_url(text)
    except ArgumentError:
        raise ConfigError(
            "database_url is not a valid URL; expected postgresql://user:password@host:5432/db"
        ) from None
    except ValueError:
        # SQLAlchemy reads the port as a number while it parses
        raise ConfigError("database_url: the port must be a number from 1 to 65535") from None
    if listed:
        assert match is not None
        if "host" in url.query or "port" in url.query:
            raise ConfigError(
                "database_url: give the hosts in the URL (h1:5432,h2:5433) or in its query "
                "(?host=h1,h2&port=5432,5433), not both"
            )
        servers = [_host_port(item) for item in match["hosts"].split(",")]
    else:
        servers = _query_servers(url)
        if len(servers) < 2:
            return url
    query = {key: value for key, value in url.query.items() if key not in _SERVER_PARAMS}
    query["host"] = ",".join(host for host, _ in servers)
    query["port"] = ",".join(str(port) for _, port in servers)
    return url.set(query=query)


def _host_port(item: str) -> tuple[str, int]:
    """``host``, ``host:port`` or ``[v6 address]:port`` of a host list."""
    item = unquote(item.strip())
    if item.startswith("["):
        host, _, rest = item[1:].partition("]")
        port = rest.removeprefix(":")
    elif item.count(":") == 1:
        host, port = item.split(":")
    else:
        host, port = item, ""
    if not host:
        raise ConfigError("database_url: a host of the host list is empty")
    return host, _port(host, port)


def _port(host: str, text: str) -> int:
    if not text:
        return DEFAULT_PORT
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ConfigError(f"database_url: the port of host {host!r} must be a number from 1 to 65535")
    return int(text)


def _query_servers(url: URL) -> list[tuple[str, int]]:
    """The hosts of ``?host=`` (repeated, ``h:p`` each, or one list) with their ports."""
    hosts_value = url.query.get("host")
    if hosts_value is None:
        return []
    if not isinstance(hosts_value, str):
        if "port" in url.query:
            raise ConfigError(
                "database_url: give each host its port (?host=h1:5432&host=h2:5433) or list the "
                "ports apart (?host=h1,h2&port=5432,5433), not both"
            )
        return [_host_port(item) for item in hosts_value]
    hosts = [host.strip() for host in hosts_value.split(",")]
    if len(hosts) < 2:
        return []
    ports_value = url.query.get("port", "")
    ports = (ports_value if isinstance(ports_value, str) else ",".join(ports_value)).split(",")
    if len(ports) == 1:
        ports = ports * len(hosts)  # one port for every host, as libpq reads it
    if len(ports) != len(hosts):
        raise ConfigError(f"database_url: {len(hosts)} hosts but {len(ports)} ports; give one port per host")
    for host in hosts:
        if not host:
            raise ConfigError("database_url: a host of the host list is empty")
    return [(host, _port(host, port.strip())) for host, port in zip(hosts, ports, strict=True)]


def several_hosts(url: URL) -> bool:
    """Whether ``url`` (as parse_url returns it) names more than one server."""
    return len(_query_servers(url)) > 1


def for_writes(url: URL) -> URL:
    """``url`` with ``target_session_attrs=read-write`` when it names several servers and does
    not say which to take: an engine that writes must never settle on a standby."""
    if several_hosts(url) and "target_session_attrs" not in url.query:
        return url.update_query_dict({"target_session_attrs": "read-write"})
    return url


def check_url(url: URL) -> URL:
    """ConfigError for what would only fail at connect: a port that is not a number from 1 to
    65535, an unknown sslmode, a connect_timeout that is not a number. ``url`` otherwise."""
    if url.port is not None and not 1 <= url.port <= 65535:
        raise ConfigError(f"database_url: the port of host {url.host!r} must be a number from 1 to 65535")
    query = libpq_query(url)
    attrs = query.get("target_session_attrs")
    if attrs is not None and attrs not in SESSION_ATTRS:
        raise ConfigError(
            f"database_url: target_session_attrs={attrs!r} is not one of {', '.join(SESSION_ATTRS)}"
        )
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
    in_dsn = {
        key: value for key, value in libpq.items() if key not in ("connect_timeout", "target_session_attrs")
    }
    if in_dsn:
        params["dsn"] = "postgresql://?" + urlencode(in_dsn)
    if "connect_timeout" in libpq:
        params["timeout"] = float(libpq["connect_timeout"])
    if "target_session_attrs" in libpq:
        params["target_session_attrs"] = libpq["target_session_attrs"]
    return params


def with_libpq_params(engine: AsyncEngine) -> AsyncEngine:
    """Let ``engine`` connect with the libpq parameters of its URL, and to a URL's several
    hosts one at a time (akadze.db.hosts); returns it."""

    @event.listens_for(engine.sync_engine, "do_connect")
    def _libpq(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
        libpq = {key: cparams.pop(key) for key in list(cparams) if key in LIBPQ_PARAMS}
        if libpq:
            cparams.update(connect_params({k: v if isinstance(v, str) else v[-1] for k, v in libpq.items()}))
        if hosts.several(cparams):
            # SQLAlchemy's asyncpg adapter connects with this instead of asyncpg.connect
            cparams["async_creator_fn"] = hosts.connect_in_turn

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


def asyncpg_dsns(url: URL) -> list[tuple[str, str | None]]:
    """What a process that does not load SQLAlchemy (the heartbeat's) connects with: DSNs to
    try one after the other, each alone and each with the query that says whether its server
    is what target_session_attrs asks for (akadze.db.hosts), or None to take any. One per host
    of a URL with several, for each round (prefer-standby: standbys first); else the one DSN."""
    servers = _query_servers(url)
    if len(servers) < 2:
        return [(asyncpg_dsn(url), None)]
    wanted = libpq_query(url).get("target_session_attrs", "any")
    rounds = ("standby", "any") if wanted == "prefer-standby" else (wanted,)
    single = url.set(
        query={
            key: value
            for key, value in url.query.items()
            if key not in (*_SERVER_PARAMS, "target_session_attrs")
        }
    )
    return [
        (asyncpg_dsn(single.update_query_dict({"host": host, "port": str(port)})), hosts.CHECKS.get(attrs))
        for attrs in rounds
        for host, port in servers
    ]
