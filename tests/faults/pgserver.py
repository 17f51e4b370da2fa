"""The scenarios' own PostgreSQL, from akadze's embedded launcher, on a loopback port.

Scenarios that restart the server, or that load it with many worker processes, use their
own server instead of the shared one. Restarts: ``fast`` is ``pg_ctl stop -m fast``;
``immediate`` is ``pg_ctl stop -m immediate`` (a crash: recovery from WAL at the next start).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import asyncpg

from akadze import embedded
from akadze.embedded.runner import runner_for, wheel_bindir

from .pgbouncer import free_port


class OwnServer:
    def __init__(self, folder: Path, *, durable: bool = True, port: int | None = None) -> None:
        self.folder = folder
        self.pgdata = folder / "pgdata"
        self.durable = durable
        self.port = port or free_port()

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def dsn(self, database: str = "postgres") -> str:
        """An asyncpg DSN."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def url(self, database: str = "postgres", *, port: int | None = None) -> str:
        """An akadze URL, optionally through another port (a proxy, PgBouncer)."""
        return f"postgresql+asyncpg://postgres@127.0.0.1:{port or self.port}/{database}"

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        embedded.start(self.pgdata, port=self.port, durable=self.durable)

    def stop(self, mode: str = "fast") -> None:
        if mode == "fast":
            embedded.stop(self.pgdata)
            return
        runner = runner_for(wheel_bindir())
        result = runner.run(["pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "-m", mode, "stop"])
        if result.returncode != 0:
            raise RuntimeError(f"pg_ctl stop -m {mode}: {result.stderr or result.stdout}")

    async def wait_ready(self, timeout: float = 60.0) -> float:
        """Seconds until the server accepts a connection."""
        started = time.monotonic()
        while True:
            try:
                conn = await asyncpg.connect(self.dsn(), timeout=2)
            except Exception:
                if time.monotonic() - started > timeout:
                    raise
                await asyncio.sleep(0.05)
                continue
            await conn.close()
            return time.monotonic() - started

    async def create_database(self, name: str) -> None:
        conn = await asyncpg.connect(self.dsn())
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
