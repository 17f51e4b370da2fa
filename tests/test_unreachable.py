"""A producer whose database cannot be reached gets one error naming the server (issue 33):
DatabaseUnreachableError, a ConnectionError whose message gives the URL's address and the
driver's reason, never the password, and a traceback without the driver's chain."""

from __future__ import annotations

import socket
import subprocess
import textwrap
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from akadze import Akadze
from akadze.errors import DatabaseUnreachableError
from tests.conftest import with_database
from tests.support import PYTHON, ROOT


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def calls(app: Akadze) -> dict[str, Callable[[], Awaitable[Any]]]:
    task = app.task("far.ping")(lambda n: n)
    return {
        "enqueue": lambda: task.enqueue(n=1),
        "enqueue_many": lambda: task.enqueue_many([{"n": 1}, {"n": 2}]),
        "get_job": lambda: app.get_job(1),
        "wait_for": lambda: app.wait_for(1, timeout=60),
        "migrate": lambda: app.migrate(),
    }


@pytest.mark.parametrize("call", ["enqueue", "enqueue_many", "get_job", "wait_for", "migrate"])
async def test_a_closed_port_is_one_error_naming_the_address_not_the_password(call: str) -> None:
    port = closed_port()
    async with Akadze(f"postgresql://shop:s3cret-pw@127.0.0.1:{port}/shop") as app:
        with pytest.raises(DatabaseUnreachableError) as caught:
            await calls(app)[call]()
    error = caught.value
    assert isinstance(error, ConnectionError)
    assert error.address == f"shop@127.0.0.1:{port}/shop"
    assert str(error).startswith(f"cannot connect to the database at shop@127.0.0.1:{port}/shop (")
    assert str(error).endswith("); check the database URL")
    assert "ConnectionRefusedError" in error.reason
    assert "s3cret-pw" not in str(error)
    assert error.__cause__ is None and error.__suppress_context__


async def test_a_database_that_does_not_exist_says_so(server_url: str) -> None:
    async with Akadze(with_database(server_url, "akadze_no_such_shop")) as app:
        with pytest.raises(DatabaseUnreachableError, match='database "akadze_no_such_shop" does not exist'):
            await calls(app)["enqueue"]()


def test_the_producer_sees_a_short_traceback_ending_in_one_line() -> None:
    """The 114 lines ending in a raw ConnectionRefusedError were SQLAlchemy's and asyncpg's."""
    port = closed_port()
    script = textwrap.dedent(
        f"""
        import asyncio
        from akadze import Akadze

        app = Akadze("postgresql://shop:s3cret-pw@127.0.0.1:{port}/shop")

        @app.task("shop.ping")
        async def ping(n: int) -> None: ...

        asyncio.run(ping.enqueue(n=1))
        """
    )
    done = subprocess.run([PYTHON, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[-1] == (
        f"akadze.errors.DatabaseUnreachableError: cannot connect to the database at "
        f"shop@127.0.0.1:{port}/shop (ConnectionRefusedError: [Errno 111] Connect call failed "
        f"('127.0.0.1', {port})); check the database URL"
    )
    assert "During handling" not in done.stderr and "direct cause" not in done.stderr
    assert "sqlalchemy" not in done.stderr and "s3cret-pw" not in done.stderr
