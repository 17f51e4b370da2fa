"""Which database errors are worth retrying: the one place that classifies them."""

from __future__ import annotations

import asyncio

from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

#: SQLSTATE classes and codes that pass: connection loss, shutdown, serialization,
#: deadlock, lock wait, a failover that left a read-only server
_TRANSIENT_CLASSES = ("08", "57P")
_TRANSIENT_CODES = frozenset({"40001", "40P01", "55P03", "25006", "53300", "57014"})


#: asyncpg's errors that mean "no server to be had right now", though they carry no SQLSTATE:
#: every host of a multi-host URL answered, none as target_session_attrs asks (a failover
#: between the old primary's demotion and the new one's promotion, or a standby not yet promoted)
_TRANSIENT_DRIVER_ERRORS = frozenset({"TargetServerAttributeNotMatched"})


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it wraps (its cause, SQLAlchemy's ``orig``), outermost first."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in found):
        found.append(current)
        current = current.__cause__ or getattr(current, "orig", None)
    return found


def no_server_fits(exc: BaseException) -> bool:
    """True when every host of the URL answered and none is what target_session_attrs asks
    for: no primary for now (a failover under way), or a URL naming standbys only."""
    return any(type(inner).__name__ in _TRANSIENT_DRIVER_ERRORS for inner in _chain(exc))


def sqlstate(exc: BaseException) -> str | None:
    """The SQLSTATE of ``exc`` or of the first error it wraps (SQLAlchemy's ``orig``, a cause);
    None when none carries one (a lost socket). Callers compare codes: 42P01 is a missing table."""
    for current in _chain(exc):
        code = getattr(current, "sqlstate", None) or getattr(current, "pgcode", None)
        if isinstance(code, str):
            return code
    return None


def is_transient(exc: BaseException) -> bool:
    """True for errors that a later try on a fresh connection may not meet again."""
    if isinstance(exc, OSError | ConnectionError | asyncio.TimeoutError | TimeoutError):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    if no_server_fits(exc):
        return True
    code = sqlstate(exc)
    if code is not None:
        return code in _TRANSIENT_CODES or code.startswith(_TRANSIENT_CLASSES)
    if isinstance(exc, InterfaceError | OperationalError):
        return True
    name = type(exc).__name__
    # asyncpg's client-side connection errors carry no SQLSTATE
    return name in {"ConnectionDoesNotExistError", "InterfaceError", "InternalClientError"} or (
        "connection" in str(exc).lower() and "closed" in str(exc).lower()
    )


#: SQLSTATEs of a connection refused before any statement: the login (28), the database (3D),
#: the client or server giving up on the connection (08001, 08004), a server starting up or
#: out of connection slots
_CONNECT_CODES = ("28", "3D", "08001", "08004", "57P03", "53300")


def raise_if_unreachable(exc: BaseException, engine: AsyncEngine | None) -> None:
    """Raise DatabaseUnreachableError (the address of ``engine``'s URL, the driver's reason)
    when ``exc`` means no connection could be made; anything else (or no engine: the caller's
    own connection) is left to the caller.

    Raised ``from None``: a producer's traceback ends in one line that names the server,
    not in the driver's chain (the driver's error stays its ``__context__``).
    """
    from akadze.errors import DatabaseUnreachableError

    if engine is None or isinstance(exc, DatabaseUnreachableError):
        return
    chain = _chain(exc)
    code = sqlstate(exc) or ""
    refused = any(isinstance(inner, OSError | TimeoutError) for inner in chain)
    if refused or code.startswith(_CONNECT_CODES) or no_server_fits(exc):
        inner = chain[-1]
        words = (str(inner).strip().splitlines() or [""])[0]
        reason = f"{type(inner).__name__}: {words}" if words else type(inner).__name__
        raise DatabaseUnreachableError(address(engine.url), reason) from None


def address(url: URL) -> str:
    """``user@host:port/database`` of a database URL, without its password (several hosts,
    or a socket directory, as the URL's ``?host=`` gives them)."""
    host: object = url.host or url.query.get("host") or "localhost"
    hosts = ",".join(host) if isinstance(host, tuple) else str(host)
    port = f":{url.port}" if url.port else ""
    user = f"{url.username}@" if url.username else ""
    return f"{user}{hosts}{port}/{url.database or ''}"


def violates(exc: BaseException, index: str) -> bool:
    """True when ``exc`` is a unique violation (SQLSTATE 23505) of the index named ``index``:
    a conflict a statement could not see in its snapshot (a row committed while it ran)."""
    if sqlstate(exc) != "23505":
        return False
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if getattr(current, "constraint_name", None) == index:
            return True
        current = current.__cause__ or getattr(current, "orig", None)
    return False
