"""Which database errors are worth retrying: the one place that classifies them."""

from __future__ import annotations

import asyncio

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

#: SQLSTATE classes and codes that pass: connection loss, shutdown, serialization,
#: deadlock, lock wait, a failover that left a read-only server
_TRANSIENT_CLASSES = ("08", "57P")
_TRANSIENT_CODES = frozenset({"40001", "40P01", "55P03", "25006", "53300", "57014"})


def sqlstate(exc: BaseException) -> str | None:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        code = getattr(current, "sqlstate", None) or getattr(current, "pgcode", None)
        if isinstance(code, str):
            return code
        current = current.__cause__ or getattr(current, "orig", None)
    return None


def is_transient(exc: BaseException) -> bool:
    """True for errors that a later try on a fresh connection may not meet again."""
    if isinstance(exc, OSError | ConnectionError | asyncio.TimeoutError | TimeoutError):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
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
