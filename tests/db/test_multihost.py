"""Multi-host database URLs (issue 30, point 1): every form libpq takes is read, and every
connection akadze opens (the app's engine, enqueue's raw connections, a worker's claims,
outcomes, listener and heartbeat process, the CLI, the dashboard, generated clients'
configure) tries the hosts in order and keeps the one target_session_attrs asks for.

The first host of these URLs is a port nobody listens on (a dead primary); the second is the
test's server. With ``target_session_attrs=standby`` every kind of connection must refuse the
server, a primary: that shows the parameter reaches each of them.
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, TypedDict

import asyncpg
import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

import akadze.client
from akadze import Akadze, JobState
from akadze.app import normalize_url
from akadze.cli import app as cli
from akadze.client import RemoteTask
from akadze.db import prepared
from akadze.db.errors import is_transient
from akadze.db.url import asyncpg_dsns
from akadze.errors import ConfigError
from akadze.web import create_app
from akadze.worker import Worker
from akadze.worker.beat import Beat
from tests.conftest import wait_until
from tests.faults.pgbouncer import free_port


@pytest.mark.parametrize(
    ("given", "hosts", "ports"),
    [
        ("postgresql://u:p@h1:5432,h2:5433/db", "h1,h2", "5432,5433"),
        ("postgresql://u:p@h1,h2:6000/db", "h1,h2", "5432,6000"),
        ("postgresql://u:p@[::1]:5432,[fe80::2]/db", "::1,fe80::2", "5432,5432"),
        ("postgresql://u:p@/db?host=h1:5432&host=h2:5433", "h1,h2", "5432,5433"),
        ("postgresql://u:p@/db?host=h1,h2&port=5432,5433", "h1,h2", "5432,5433"),
        ("postgresql://u:p@/db?host=h1,h2&port=6000", "h1,h2", "6000,6000"),
        ("postgres://u:p,w@h1:1,h2:2/db?sslmode=require", "h1,h2", "1,2"),
    ],
)
def test_every_multi_host_form_becomes_one_host_list_with_a_port_each(
    given: str, hosts: str, ports: str
) -> None:
    url = make_url(normalize_url(given))
    assert url.host is None and url.port is None
    assert (url.query["host"], url.query["port"]) == (hosts, ports)
    assert url.database == "db" and url.username == "u"
    # a URL for writes that names several hosts skips standbys unless it says otherwise
    assert url.query["target_session_attrs"] == "read-write"
    assert make_url(normalize_url(given, writes=False)).query.get("target_session_attrs") is None
    assert normalize_url(normalize_url(given)) == normalize_url(given)


def test_one_host_and_an_explicit_target_session_attrs_are_left_as_given() -> None:
    assert normalize_url("postgresql://u@h1:5432/db") == "postgresql+asyncpg://u@h1:5432/db"
    kept = make_url(normalize_url("postgresql://u@h1,h2/db?target_session_attrs=prefer-standby"))
    assert kept.query["target_session_attrs"] == "prefer-standby"
    socket = make_url(normalize_url("postgresql://u@/db?host=/run/pg"))
    assert dict(socket.query) == {"host": "/run/pg"}


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ("postgresql://u:secret@h1:5432,h2:x/db", "port of host 'h2' must be a number"),
        ("postgresql://u:secret@h1:5432,h2:70000/db", "port of host 'h2' must be a number"),
        ("postgresql://u:secret@h1,,h2/db", "a host of the host list is empty"),
        ("postgresql://u:secret@h1,h2/db?host=h3", "not both"),
        ("postgresql://u:secret@/db?host=h1,h2&port=1,2,3", "2 hosts but 3 ports"),
        ("postgresql://u:secret@/db?host=h1:1&host=h2:2&port=3", "not both"),
        ("postgresql://u:secret@h1,h2/db?target_session_attrs=rw", "target_session_attrs='rw' is not one of"),
    ],
)
def test_a_bad_host_list_is_one_clear_config_error(given: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as caught:
        Akadze(database_url=given)
    assert "secret" not in str(caught.value)


def servers(database_url: str, *first: tuple[str, int], query: str = "") -> str:
    """The test's database at ``first`` hosts, then at its own server: the authority form
    ``h1:p1,h2:p2`` on TCP, the query form for a server on a unix socket (the embedded one);
    ``query`` (``key=value&...``) added to the URL's query."""
    url = make_url(database_url)
    host = url.host or str(url.query["host"])
    listed = [*first, (host, url.port or 5432)]
    if url.host is not None:
        hosts = ",".join(f"{name}:{port}" for name, port in listed)
        return f"postgresql://{url.username}@{hosts}/{url.database}" + (f"?{query}" if query else "")
    names, ports = ",".join(name for name, _ in listed), ",".join(str(port) for _, port in listed)
    return f"postgresql://{url.username}@/{url.database}?host={names}&port={ports}" + (
        f"&{query}" if query else ""
    )


def multi_host(database_url: str, first: int | None = None, query: str = "") -> str:
    """The test's database behind a dead first host: a port nobody listens on, or ``first``."""
    return servers(database_url, ("127.0.0.1", first or free_port()), query=query)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that takes TCP connections and never answers (a host gone without a reset, or
    a pooler holding its clients in front of a dead server)."""
    with socket.socket() as hole:
        hole.bind(("127.0.0.1", 0))
        hole.listen(128)  # never accepted: the kernel completes the handshakes, nobody replies
        yield int(hole.getsockname()[1])


@pytest.fixture(params=["refused", "silent"])
def dead_host(request: pytest.FixtureRequest) -> int | None:
    """The first host of the URL: refusing connections, or taking them and never answering."""
    if request.param == "refused":
        return None
    return int(request.getfixturevalue("silent_port"))


class EchoArgs(TypedDict):
    n: int


def register(app: Akadze, done: list[int]) -> Any:
    @app.task("mh.echo", queue="mh")
    async def echo(n: int) -> int:
        done.append(n)
        return n

    return echo


async def test_every_connection_akadze_opens_skips_the_dead_host(
    database_url: str, dead_host: int | None
) -> None:
    """Each host has its own connect_timeout (1 s here): a silent first host costs each new
    connection that second, where asyncpg alone would spend its whole timeout on it."""
    url = (
        multi_host(database_url, dead_host)
        + ("&" if "?" in multi_host(database_url) else "?")
        + "connect_timeout=1"
    )
    done: list[int] = []
    app = Akadze(database_url=url)
    echo = register(app, done)
    worker = Worker(
        app, queues=["mh"], lost_after=timedelta(seconds=1.2), heartbeat_interval=timedelta(seconds=0.2)
    )
    running = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await echo.enqueue(n=1)  # a raw connection from the pool
        akadze.client.configure(database_url=url)
        remote: RemoteTask[EchoArgs] = RemoteTask(
            "mh.echo",
            queue="mh",
            priority=0,
            max_attempts=3,
            args_fp=echo.codec.fingerprint,
            args_type=EchoArgs,
        )
        await remote._enqueue({"n": 2})  # a generated client's configured engine
        await wait_until(lambda: sorted(done) == [1, 2], timeout=20)
        heartbeat = worker._heartbeat
        assert heartbeat is not None and heartbeat.process is not None, "the beats come from the process"
        beats: set[Any] = set()

        async def beating() -> bool:
            async with app.engine.connect() as conn:
                beats.update((await conn.execute(text("SELECT heartbeat_at FROM akadze_workers"))).scalars())
            return len(beats) >= 3

        await wait_until(beating, timeout=20, interval=0.1)

        async def listening() -> bool:
            async with app.engine.connect() as conn:
                found = await conn.execute(
                    text(
                        "SELECT count(*) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND query LIKE 'LISTEN %'"
                    )
                )
                return bool(found.scalar())

        await wait_until(listening, timeout=20)  # the listener's session
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(app)), base_url="http://d"
        ) as web:
            page = await web.get("/jobs")
            assert page.status_code == 200 and "mh.echo" in page.text
    finally:
        worker.stop()
        await running
        await akadze.client.dispose()
        await app.dispose()
    listed = await asyncio.to_thread(
        CliRunner().invoke, cli, ["jobs", "list", "--database-url", url, "--output", "json"]
    )
    assert listed.exit_code == 0, listed.output
    assert '"task":"mh.echo"' in listed.output and '"state":"succeeded"' in listed.output


async def test_target_session_attrs_reaches_every_kind_of_connection(database_url: str) -> None:
    """The server, listed twice, is a primary: asked for a standby, no connection may settle
    on it. (With a dead host in the list, asyncpg reports that host's error instead.)"""
    parsed = make_url(database_url)
    server = (parsed.host or str(parsed.query["host"]), parsed.port or 5432)
    url = servers(database_url, server, query="target_session_attrs=standby")
    app = Akadze(database_url=url)
    echo = register(app, [])
    try:
        with pytest.raises(
            Exception, match="is not what target_session_attrs=standby asks for"
        ) as engine_error:
            async with app.engine.connect():
                pass
        assert is_transient(engine_error.value), "a failover in progress: retried, never fatal"
        with pytest.raises(Exception, match="is not what target_session_attrs=standby asks for"):
            await echo.enqueue(n=1)
        with pytest.raises(LookupError, match="target_session_attrs"):
            # the heartbeat process connects with this DSN
            await Beat(
                {
                    "dsns": asyncpg_dsns(app.engine.url),
                    "interval_s": 1.0,
                    "heartbeat": ["", []],
                    "register": ["", []],
                }
            ).once()
    finally:
        await app.dispose()
    env = {key: value for key, value in os.environ.items() if not key.startswith("AKADZE_")}
    refused = await asyncio.to_thread(
        CliRunner().invoke, cli, ["jobs", "list", "--database-url", url], env=env
    )
    assert refused.exit_code == 2
    assert "target_session_attrs=standby" in refused.output and "check the database URL" in refused.output


async def test_a_worker_rides_out_a_time_with_no_writable_server(database_url: str) -> None:
    """The one host answers but is not writable (as between a failover's demotion of the old
    primary and the promotion of the new one): the worker keeps retrying instead of stopping,
    and serves once the server takes writes again."""
    url = make_url(normalize_url(database_url))
    admin = await asyncpg.connect(url.set(drivername="postgresql").render_as_string(hide_password=False))
    writable = url.update_query_dict({"target_session_attrs": "read-write"})
    app = Akadze(database_url=writable.render_as_string(hide_password=False))
    done: list[int] = []
    echo = register(app, done)
    worker = Worker(
        app,
        queues=["mh"],
        lost_after=timedelta(seconds=3),
        heartbeat_interval=timedelta(seconds=0.5),
        poll_interval=timedelta(seconds=0.2),
    )
    running = asyncio.create_task(worker.run(handle_signals=False))
    try:

        async def registered() -> bool:
            return bool(await admin.fetchval("SELECT count(*) FROM akadze_workers"))

        await wait_until(registered, timeout=20)
        # the database turns read-only for new sessions, and every session of the worker ends
        await admin.execute(f'ALTER DATABASE "{url.database}" SET default_transaction_read_only = on')
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        await asyncio.sleep(2.0)  # claims, outcome writes and beats meet no writable server
        assert not running.done(), "the worker stopped while no server was writable"
        await admin.execute(f'ALTER DATABASE "{url.database}" RESET default_transaction_read_only')
        await echo.enqueue(n=7)
        await wait_until(lambda: done == [7], timeout=20)
    finally:
        await admin.execute(f'ALTER DATABASE "{url.database}" RESET default_transaction_read_only')
        await admin.close()
        worker.stop()
        await running
        await app.dispose()


async def test_connections_whose_server_went_away_are_replaced_before_use(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """After a failover every connection a process kept is closed: the first enqueue, read,
    claim and outcome write after it must each take a new connection (to the new primary)
    instead of failing once on the closed one. Here the server ends every session of the
    test's database while the producer and the worker sit idle."""
    url = make_url(normalize_url(database_url))
    admin = await asyncpg.connect(url.set(drivername="postgresql").render_as_string(hide_password=False))
    app = Akadze(database_url=database_url)
    done: list[int] = []
    echo = register(app, done)
    # no poll while the sessions end: a claim sent in the moment before its connection's close
    # arrives fails once, which no check can see; the listener's return wakes the worker
    worker = Worker(app, queues=["mh"], poll_interval=timedelta(seconds=30))
    running = asyncio.create_task(worker.run(handle_signals=False))
    try:
        job = await echo.enqueue(n=1)

        async def written() -> bool:
            # the task's body ran before its outcome was written: a write still in flight when
            # the sessions end fails once (a CI run logged it); wait for it, on a pooled
            # connection that is kept for later
            found = await app.get_job(job.id)
            return found is not None and found.state is JobState.SUCCEEDED

        await wait_until(written, timeout=20)
        assert done == [1]
        caplog.clear()
        ended = await admin.fetchval(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        assert ended >= 3  # the kept enqueue connection, the pooled one, the worker's
        await asyncio.sleep(0.5)  # the sockets close; nothing is sent on them meanwhile
        job = await echo.enqueue(n=2)
        assert (await app.get_job(job.id)) is not None
        await wait_until(lambda: done == [1, 2], timeout=20)
    finally:
        await admin.close()
        worker.stop()
        await running
        await app.dispose()
    # their statements went with them: the tables of prepared statements hold no closed one
    await asyncio.sleep(0.1)  # asyncpg calls a closed connection's listeners soon after
    gc.collect()
    assert not [conn for conn in [*prepared._by_connection, *prepared._described] if conn.is_closed()]
    failed = [
        r.getMessage() for r in caplog.records if "failed" in r.getMessage() or "could not" in r.getMessage()
    ]
    assert [line for line in failed if "listener" not in line] == []
