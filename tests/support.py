"""Small helpers shared by the test files: direct SQL on the test's database, job rows."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import asyncpg
from sqlalchemy.engine import make_url

from akadze.app import normalize_url

#: the checkout's root, for subprocesses that import akadze and tests.apps
ROOT = Path(__file__).resolve().parent.parent


def plain(url: str) -> str:
    """The asyncpg form (postgresql://...) of an akadze database URL."""
    return make_url(normalize_url(url)).set(drivername="postgresql").render_as_string(hide_password=False)


async def fetch(database_url: str, query: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(plain(database_url))
    try:
        return list(await conn.fetch(query, *args))
    finally:
        await conn.close()


async def fetchval(database_url: str, query: str, *args: Any) -> Any:
    conn = await asyncpg.connect(plain(database_url))
    try:
        return await conn.fetchval(query, *args)
    finally:
        await conn.close()


async def execute(database_url: str, *statements: str) -> None:
    conn = await asyncpg.connect(plain(database_url))
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


async def seconds_until_run(database_url: str, job_id: int) -> float:
    """How far in the future (database clock) the job's run_at is."""
    value = await fetchval(
        database_url, "SELECT extract(epoch FROM run_at - now()) FROM akadze_jobs WHERE id = $1", job_id
    )
    return float(value)


def subprocess_env(database_url: str, **extra: str) -> dict[str, str]:
    """The environment of a worker subprocess: this checkout importable, the test's database."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env["AKADZE_DATABASE_URL"] = database_url
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


PYTHON = sys.executable
