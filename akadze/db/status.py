"""Which shipped migrations a database has applied, and the checks built on that answer.

``akadze db status`` prints it; a worker refuses to start on a schema older than its code
(SchemaVersionError); a schema newer than the code (a deploy rolled back after a newer akadze
migrated) is accepted with a warning, because migrations only add what older code ignores
(docs/decisions.md). Producers that meet a missing akadze table get SchemaMissingError.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from akadze.db.errors import sqlstate
from akadze.db.migrate import Migration, migrations
from akadze.errors import SchemaMissingError, SchemaVersionError

logger = logging.getLogger("akadze.db")

# the record table is migrate.py's; reading it needs no lock
_EXISTS = text("SELECT to_regclass('akadze_schema_migrations') IS NOT NULL")
_APPLIED = text("SELECT version, name, applied_at FROM akadze_schema_migrations ORDER BY version")


@dataclass(frozen=True, slots=True)
class Applied:
    """One migration as the database recorded it (akadze_schema_migrations)."""

    version: int
    name: str
    applied_at: datetime


@dataclass(frozen=True, slots=True)
class SchemaStatus:
    """A database's migrations against this code's: what ``akadze db status`` prints and the
    worker's start checks."""

    #: every migration recorded in the database, this code's or not
    applied: list[Applied]
    #: shipped migrations the database has not applied
    pending: list[Migration]
    #: recorded versions this code does not ship (a newer akadze migrated the database)
    unknown: list[Applied]
    #: the newest migration this code ships
    code_version: int

    @property
    def database_version(self) -> int:
        """The newest recorded version (0 when nothing was migrated)."""
        return max((a.version for a in self.applied), default=0)

    @property
    def up_to_date(self) -> bool:
        """True when every shipped migration is applied (unknown newer ones do not count against it)."""
        return not self.pending


async def schema_status(conn: AsyncConnection) -> SchemaStatus:
    """Read which migrations ``conn``'s database has applied; a database never migrated has none
    applied and all pending. Reads only and takes no lock: during a migrate it sees the
    migrations committed so far. The transaction it begins is the caller's to end."""
    shipped = migrations()
    applied: list[Applied] = []
    if await conn.scalar(_EXISTS):
        applied = [Applied(r.version, r.name, r.applied_at) for r in await conn.execute(_APPLIED)]
    done = {a.version for a in applied}
    known = {m.version for m in shipped}
    return SchemaStatus(
        applied=applied,
        pending=[m for m in shipped if m.version not in done],
        unknown=[a for a in applied if a.version not in known],
        code_version=max(known, default=0),
    )


async def check_schema(engine: AsyncEngine) -> SchemaStatus:
    """Raise SchemaVersionError when a shipped migration is not applied; warn on a newer schema."""
    async with engine.connect() as conn:
        status = await schema_status(conn)
        await conn.rollback()
    if status.pending:
        raise SchemaVersionError(
            status.database_version, status.code_version, [m.version for m in status.pending]
        )
    if status.unknown:
        logger.warning(
            "the database schema is at version %d, newer than this akadze (version %d): a newer "
            "release migrated it; running, since migrations only add what older code ignores",
            status.database_version,
            status.code_version,
        )
    return status


def raise_if_schema_missing(exc: BaseException) -> None:
    """Turn a missing akadze table (SQLSTATE 42P01 naming an akadze_ relation) into
    SchemaMissingError, without the driver's chain; any other error is left to the caller."""
    if sqlstate(exc) == "42P01" and "akadze_" in _message(exc):
        raise SchemaMissingError() from None
    return None


def _message(exc: BaseException) -> str:
    inner: Any = exc
    while (nested := getattr(inner, "orig", None) or inner.__cause__) is not None and nested is not inner:
        inner = nested
    return str(inner)
