"""Forward-only schema migrations, applied under an advisory lock and recorded in a table."""

from __future__ import annotations

import hashlib
import importlib.resources
import re
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from akadze.db import locks
from akadze.db.pooled import functions_sql
from akadze.db.raw import driver_connection
from akadze.errors import MigrationEditedError

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_BOOTSTRAP = """\
CREATE TABLE IF NOT EXISTS akadze_schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""


#: checksums a shipped migration had before its text was replaced, which an applied migration
#: may carry: 0011 held copies of the claim statements until they became functions made by
#: every migrate (akadze.db.pooled); its new text does the same to a database (nothing)
SUPERSEDED: dict[int, frozenset[str]] = {
    11: frozenset({"e68fd14132830c07e706b217b0f480ce274393c0fb6e7e9326154f39cc451b5c"}),
}


@dataclass(frozen=True, slots=True)
class Migration:
    """One shipped migration file: ``NNNN_name.sql`` under akadze/db/migrations/, and its text."""

    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        """SHA-256 of the text, hex: recorded when applied, compared at every later migrate."""
        return hashlib.sha256(self.sql.encode()).hexdigest()

    def check_recorded(self, recorded: str) -> None:
        """Raise MigrationEditedError unless ``recorded``, the checksum a database recorded when
        it applied this migration, is this file's (or one it had before, SUPERSEDED)."""
        if recorded != self.checksum and recorded not in SUPERSEDED.get(self.version, ()):
            raise MigrationEditedError(self.file_name, recorded=recorded, shipped=self.checksum)

    @property
    def file_name(self) -> str:
        """The file's name, ``0007_name.sql``."""
        return f"{self.version:04d}_{self.name}.sql"


def migrations() -> list[Migration]:
    """Every shipped migration, in order."""
    found: list[Migration] = []
    folder = importlib.resources.files("akadze.db") / "migrations"
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    return found


def render_sql() -> str:
    """The whole schema as one script, for teams that ship migrations with Alembic or by hand."""
    parts = [
        "-- akadze schema: apply in one transaction; each migration records itself.",
        "BEGIN;",
        _BOOTSTRAP + ";",
    ]
    for m in migrations():
        parts.append(f"\n-- migration {m.version:04d}_{m.name}\n{m.sql.strip()}")
        parts.append(
            "INSERT INTO akadze_schema_migrations (version, name, checksum) "
            f"VALUES ({m.version}, '{m.name}', '{m.checksum}') ON CONFLICT DO NOTHING;"
        )
    parts.append(
        f"\n-- the claim cycle's functions for workers behind a pooler (akadze.db.pooled)\n{functions_sql()}"
    )
    parts.append("COMMIT;\n")
    return "\n".join(parts)


async def migrate(engine: AsyncEngine) -> list[int]:
    """Apply the missing migrations; returns the versions applied (empty when up to date).

    Each migration runs in its own transaction under a transaction-scoped advisory lock, so
    processes that migrate at once take turns and the later ones find nothing left to do.
    An applied migration whose shipped file no longer has the checksum recorded when it was
    applied stops the run before anything later is applied (MigrationEditedError, naming the
    file): the database was built by other SQL than the code now describes.
    """
    applied: list[int] = []
    for m in migrations():
        async with engine.begin() as conn:
            await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": locks.MIGRATE})
            await conn.execute(text(_BOOTSTRAP))
            done = await conn.scalar(
                text("SELECT checksum FROM akadze_schema_migrations WHERE version = :v"),
                {"v": m.version},
            )
            if done is not None:
                m.check_recorded(done)
                continue
            # a script of many statements: the driver's simple protocol, in this transaction
            await (await driver_connection(conn)).execute(m.sql)
            await conn.execute(
                text("INSERT INTO akadze_schema_migrations (version, name, checksum) VALUES (:v, :n, :c)"),
                {"v": m.version, "n": m.name, "c": m.checksum},
            )
            applied.append(m.version)
    async with engine.begin() as conn:
        await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": locks.MIGRATE})
        # made again at every migrate, whatever was applied: each function's name is a digest of
        # its definition, so this adds this version's beside earlier ones (db/pooled.py)
        await (await driver_connection(conn)).execute(functions_sql())
    return applied
