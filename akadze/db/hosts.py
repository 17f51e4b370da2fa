"""Connecting to one of several servers, each tried in turn with a time limit of its own.

asyncpg takes a list of hosts and tries them in order, but its ``timeout`` covers the whole
attempt: a first host that never answers (its machine gone, so no reset comes; or a pooler in
front of a dead server, which holds the client while it retries) uses all of it, and the
second host, the new primary, is never tried. libpq gives each host its own
``connect_timeout``; so does akadze: every connection of a URL with several hosts is made
here, one host at a time, each within ``connect_timeout`` (default ``HOST_TIMEOUT_S``), going
on to the next when a host cannot be reached, does not answer in time, refuses connections for
now (starting up, too many clients) or is not what ``target_session_attrs`` asks for. A host
that answers and refuses the login (a wrong password, no such database) ends the attempt, as
in libpq.

What a server is, akadze asks it with a query (``CHECKS``), within the same time limit,
instead of trusting the parameters it announced at login: a pooler in front of a server
(PgBouncer) announces the ones it cached from a server connection of earlier, a primary's
after that server died, then holds every query until its ``query_wait_timeout``. The query
costs a round trip per new connection, for URLs of several hosts only.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg

#: how long one host of a multi-host URL may take to connect when the URL gives no
#: connect_timeout (asyncpg's own default, 60 s, would be spent on a dead host alone)
HOST_TIMEOUT_S = 10.0

#: per target_session_attrs: a query of one boolean, true when the server is what is asked
CHECKS = {
    "read-write": "SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off'",
    "read-only": "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on'",
    "primary": "SELECT NOT pg_is_in_recovery()",
    "standby": "SELECT pg_is_in_recovery()",
}


def next_host(exc: BaseException) -> bool:
    """Whether an error connecting to one host lets the next one be tried."""
    if isinstance(exc, OSError | TimeoutError | asyncpg.exceptions.TargetServerAttributeNotMatched):
        return True
    if isinstance(exc, asyncpg.exceptions.InterfaceError | asyncpg.exceptions.ConnectionDoesNotExistError):
        return True  # the connection broke during the handshake
    code = getattr(exc, "sqlstate", None)
    # connection exceptions, the server starting up or shutting down, too many clients
    return isinstance(code, str) and (code.startswith(("08", "57P")) or code == "53300")


async def connect_in_turn(
    *args: Any,
    host: list[str],
    port: list[int],
    timeout: float | None = None,  # noqa: ASYNC109 (asyncpg.connect's own keyword, per host here)
    target_session_attrs: str | None = None,
    **kwargs: Any,
) -> Any:
    """``asyncpg.connect()`` to the first of ``host``/``port`` that takes the connection and
    is what ``target_session_attrs`` asks for, each within ``timeout`` (per host).

    ``prefer-standby`` tries every host for a standby first, then every host for any server.
    """
    per_host = HOST_TIMEOUT_S if timeout is None else timeout
    wanted = target_session_attrs or "any"
    rounds = ("standby", "any") if wanted == "prefer-standby" else (wanted,)
    last: BaseException | None = None
    for attrs in rounds:
        for name, number in zip(host, port, strict=True):
            try:
                async with asyncio.timeout(per_host):
                    conn = await asyncpg.connect(
                        *args, host=name, port=number, target_session_attrs="any", **kwargs
                    )
                    try:
                        if attrs in CHECKS and not await conn.fetchval(CHECKS[attrs]):
                            # asyncpg's own error for it: callers (is_transient) know it
                            raise asyncpg.exceptions.TargetServerAttributeNotMatched(
                                f"{name}:{number} is not what target_session_attrs={attrs} asks for"
                            )
                    except BaseException:
                        conn.terminate()
                        raise
                    return conn
            except Exception as exc:
                if not next_host(exc):
                    raise
                last = exc
    assert last is not None
    raise last


def several(cparams: dict[str, Any]) -> bool:
    """Whether SQLAlchemy's connect arguments name more than one host."""
    hosts = cparams.get("host")
    return isinstance(hosts, list | tuple) and len(hosts) > 1
