"""libpq parameters in a database URL (issue 12, point 3): sslmode, sslrootcert,
application_name, options and connect_timeout reach the connection, the worker's and its
heartbeat's included, on a server that takes TCP over TLS only; a bad port or sslmode is one
clear ConfigError, before any connection."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import tempfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from akadze import Akadze, JobState
from akadze.errors import ConfigError
from akadze.testing import drain
from akadze.worker import Worker
from tests.conftest import wait_until

from .tls import TlsServer, available


@pytest.fixture(scope="module")
def tls_server() -> Iterator[TlsServer]:
    missing = available()
    if missing is not None:
        pytest.skip(missing)
    folder = Path(tempfile.mkdtemp(prefix="akadze-tls-"))
    server = TlsServer(folder)
    server.start()
    try:
        asyncio.run(_prepare(server))
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


async def _prepare(server: TlsServer) -> None:
    await server.create_database("tls")
    app = Akadze(database_url=f"postgresql://postgres@127.0.0.1:{server.port}/tls?sslmode=require")
    try:
        await app.migrate()
    finally:
        await app.dispose()


def url(server: TlsServer, query: str) -> str:
    return f"postgresql://postgres@127.0.0.1:{server.port}/tls?{query}"


SESSION = text(
    "SELECT s.ssl, current_setting('application_name') AS name, current_setting('search_path') AS path "
    "FROM pg_stat_ssl AS s WHERE s.pid = pg_backend_pid()"
)


async def test_sslmode_application_name_and_options_reach_the_connection(tls_server: TlsServer) -> None:
    options = quote("-c search_path=tlsapp,public")
    app = Akadze(
        database_url=url(tls_server, f"sslmode=require&application_name=akadze-tls&options={options}")
    )
    try:
        async with app.engine.connect() as conn:
            row = (await conn.execute(SESSION)).one()
        assert (row.ssl, row.name, row.path) == (True, "akadze-tls", "tlsapp,public")

        @app.task("tls.echo")
        async def echo(n: int) -> int:
            return n

        job = await echo.enqueue(n=7)
        assert await drain(app) == 1
        after = await app.get_job(job.id)
        assert after is not None and (after.state, after.result) == (JobState.SUCCEEDED, 7)
    finally:
        await app.dispose()


async def test_verify_full_checks_the_server_against_sslrootcert(tls_server: TlsServer) -> None:
    app = Akadze(
        database_url=url(tls_server, f"sslmode=verify-full&sslrootcert={quote(str(tls_server.root_cert))}")
    )
    try:
        async with app.engine.connect() as conn:
            assert (await conn.execute(SESSION)).one().ssl is True
    finally:
        await app.dispose()
    wrong = Akadze(
        database_url=url(tls_server, f"sslmode=verify-full&sslrootcert={quote(str(tls_server.other_cert))}")
    )
    try:
        with pytest.raises(ssl.SSLCertVerificationError):
            async with wrong.engine.connect():
                pass
    finally:
        await wrong.dispose()


async def test_sslmode_disable_is_applied_too(tls_server: TlsServer) -> None:
    app = Akadze(database_url=url(tls_server, "sslmode=disable&connect_timeout=5"))
    try:
        # the server takes TCP over TLS only: without TLS it rejects the connection
        with pytest.raises(DBAPIError, match="no encryption"):
            async with app.engine.connect():
                pass
    finally:
        await app.dispose()


async def test_a_worker_and_its_heartbeat_connect_with_the_url_parameters(tls_server: TlsServer) -> None:
    app = Akadze(
        database_url=url(tls_server, f"sslmode=verify-full&sslrootcert={quote(str(tls_server.root_cert))}")
    )
    worker = Worker(
        app, queues=["tls"], lost_after=timedelta(seconds=1), heartbeat_interval=timedelta(seconds=0.2)
    )
    running = asyncio.create_task(worker.run(handle_signals=False))
    try:
        async with app.engine.connect() as conn:
            beats: set[object] = set()

            async def beating() -> bool:
                found = (await conn.execute(text("SELECT heartbeat_at FROM akadze_workers"))).scalars().all()
                await conn.commit()
                beats.update(found)
                return len(beats) >= 4

            await wait_until(beating, timeout=20, interval=0.1)
        heartbeat = worker._heartbeat
        assert heartbeat is not None and heartbeat.healthy
        assert heartbeat.process is not None, "the beats came from the heartbeat process"
    finally:
        worker.stop()
        await running
        await app.dispose()


@pytest.mark.parametrize(
    ("database_url", "words"),
    [
        ("postgresql://u:secret@db.example:abc/app", "port must be a number"),
        ("postgresql://u:secret@db.example:99999/app", "port of host 'db.example' must be a number"),
        ("postgresql://u:secret@db.example/app?sslmode=requir", "sslmode='requir' is not one of"),
        ("postgresql://u:secret@db.example/app?connect_timeout=soon", "connect_timeout='soon'"),
    ],
)
def test_a_bad_port_or_parameter_is_one_clear_config_error(database_url: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as caught:
        Akadze(database_url=database_url)
    assert "secret" not in str(caught.value)
