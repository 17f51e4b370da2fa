"""akadze's schema inside a project's Alembic migrations (extra ``alembic``; docs/schema.md).

``include_object`` / ``include_name`` keep akadze's tables out of autogenerate; ``upgrade(op)``,
called from a revision, applies akadze's pending migrations in that revision's transaction,
under the advisory lock ``akadze db migrate`` takes and recorded in the same table, so the two
never disagree: whichever runs first applies a migration, the other finds it recorded.
Migrations are forward-only: ``downgrade(op)`` refuses. ``akadze db revision --alembic DIR``
writes such a revision. Alembic itself is imported by your env.py, never here.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

from sqlalchemy import text

from akadze.db import locks
from akadze.db.migrate import _BOOTSTRAP, migrations
from akadze.db.pooled import functions_sql
from akadze.errors import ForwardOnlyError

#: every table, index and sequence of akadze's schema starts with this
PREFIX = "akadze_"


def include_name(name: str | None, type_: str, parent_names: dict[str, Any]) -> bool:
    """Alembic's ``include_name`` hook: akadze's tables are not even reflected."""
    if type_ == "table":
        return not (name or "").startswith(PREFIX)
    return True


def include_object(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    """Alembic's ``include_object`` hook: akadze's tables, and their columns, indexes and
    constraints, are left out of autogenerate (neither created nor dropped).

    To combine with a hook of your own: ``include_object=lambda *a: include_object(*a) and
    mine(*a)``.
    """
    if type_ == "table":
        return not (name or "").startswith(PREFIX)
    table = getattr(obj, "table", None)
    table_name = getattr(table, "name", None)
    if isinstance(table_name, str) and table_name.startswith(PREFIX):
        return False
    return not (type_ == "index" and (name or "").startswith(PREFIX))


def upgrade(op: Any) -> list[int]:
    """Apply akadze's pending migrations in the running revision's transaction.

    Takes the advisory lock ``akadze db migrate`` takes (held until the revision commits) and
    records each migration in ``akadze_schema_migrations``, as it does; a migration already
    recorded is skipped, and one recorded with another checksum stops the upgrade
    (MigrationEditedError). Returns the versions applied. Works on an async env.py (asyncpg)
    and on a sync one (psycopg).
    """
    bind = op.get_bind()
    bind.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": locks.MIGRATE})
    bind.execute(text(_BOOTSTRAP))
    recorded = dict(bind.execute(text("SELECT version, checksum FROM akadze_schema_migrations")).all())
    applied: list[int] = []
    for m in migrations():
        done = recorded.get(m.version)
        if done is not None:
            m.check_recorded(done)
            continue
        _run_script(bind, m.sql)
        bind.execute(
            text("INSERT INTO akadze_schema_migrations (version, name, checksum) VALUES (:v, :n, :c)"),
            {"v": m.version, "n": m.name, "c": m.checksum},
        )
        applied.append(m.version)
    _run_script(bind, functions_sql())  # as migrate does: this version's functions (db/pooled.py)
    return applied


def downgrade(op: Any) -> NoReturn:
    """Refuse: akadze's migrations are forward-only."""
    raise ForwardOnlyError()


def _run_script(bind: Any, sql: str) -> None:
    """A script of many statements, in the bind's transaction, through the simple protocol."""
    driver = bind.connection.driver_connection
    if bind.dialect.driver == "asyncpg":
        # inside Alembic's run_sync (a greenlet): await the asyncpg coroutine from sync code
        from sqlalchemy.util import await_only

        await_only(driver.execute(sql))
    else:
        bind.exec_driver_sql(sql)


_TEMPLATE = '''"""akadze's schema: the migrations akadze ships, applied as `akadze db migrate` does.

Revision ID: {revision}
Revises: {down_revision_comment}
Create Date: {created}

Written by `akadze db revision --alembic`. Every akadze migration not yet recorded in the
database is applied when this revision runs; after upgrading akadze, write a new such revision
(or run `akadze db migrate`): this one's migrations are recorded, and it applies only what is
missing. Forward-only: downgrade refuses.
"""

from alembic import op

from akadze.alembic import downgrade as akadze_downgrade, upgrade as akadze_upgrade

revision = {revision!r}
down_revision = {down_revision!r}
branch_labels = None
depends_on = None


def upgrade() -> None:
    akadze_upgrade(op)


def downgrade() -> None:
    akadze_downgrade(op)
'''

_REVISION = re.compile(r"^revision\s*(?::\s*str\s*)?=\s*['\"]([0-9A-Za-z_]+)['\"]", re.MULTILINE)
_DOWN = re.compile(r"^down_revision\s*(?::[^=]+)?=\s*(.+)$", re.MULTILINE)


def write_revision(directory: Path, *, down_revision: str | None = None) -> Path:
    """Write a revision file into ``directory`` (Alembic's versions folder) that applies
    akadze's pending migrations. Without ``down_revision`` it follows the single head found
    there (ValueError when there are several). Returns the file written."""
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory} is not a directory (give Alembic's versions folder)")
    if down_revision is None:
        down_revision = _head(directory)
    revision = uuid.uuid4().hex[:12]
    version = max(m.version for m in migrations())
    path = directory / f"{revision}_akadze_schema_{version:04d}.py"
    path.write_text(
        _TEMPLATE.format(
            revision=revision,
            down_revision=down_revision,
            down_revision_comment=down_revision or "",
            created=datetime.now(UTC).isoformat(timespec="seconds"),
        ),
        encoding="utf-8",
    )
    return path


def _head(directory: Path) -> str | None:
    """The one revision of ``directory`` that no other revision follows (None if empty)."""
    revisions: set[str] = set()
    followed: set[str] = set()
    for file in directory.glob("*.py"):
        source = file.read_text(encoding="utf-8")
        found = _REVISION.search(source)
        if not found:
            continue
        revisions.add(found[1])
        down = _DOWN.search(source)
        if down:
            followed.update(re.findall(r"['\"]([0-9A-Za-z_]+)['\"]", down[1]))
    heads = sorted(revisions - followed)
    if len(heads) > 1:
        raise ValueError(f"{directory} has several heads ({', '.join(heads)}): pass --down-revision")
    return heads[0] if heads else None
