"""Which database errors are worth retrying: the one place that classifies them."""

from __future__ import annotations

import asyncio

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

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
