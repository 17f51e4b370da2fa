"""``akadze web``: what would make every page fail is checked before the banner (a database that
is missing or unmigrated, a port in use, a host that does not resolve), each one line and exit
2; once serving, its actions are logged."""

from __future__ import annotations

import re
import socket
import subprocess
import time

import httpx
import pytest

from tests.conftest import with_database
from tests.support import PYTHON, ROOT, subprocess_env

APP = "tests.apps.basic:app"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def web(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "akadze.cli", "web", APP, *args],
        cwd=ROOT,
        env=subprocess_env(database_url),
        capture_output=True,
        text=True,
        timeout=60,
    )


def assert_one_line_exit_2(done: subprocess.CompletedProcess[str], says: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == "", done.stdout  # no banner
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], done.stderr


def test_a_missing_database_is_one_line_and_exit_2(server_url: str) -> None:
    missing = with_database(server_url, "akadze_no_such_database")
    assert_one_line_exit_2(web(missing, "--port", str(free_port())), "cannot connect to the database")


def test_an_unmigrated_database_is_one_line_and_exit_2(database_url: str) -> None:
    import asyncio

    from tests.support import execute

    asyncio.run(execute(database_url, "DROP SCHEMA public CASCADE", "CREATE SCHEMA public"))
    assert_one_line_exit_2(web(database_url, "--port", str(free_port())), "akadze db migrate")


def test_a_port_in_use_is_one_line_and_exit_2(database_url: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = web(database_url, "--port", str(port))
    assert_one_line_exit_2(done, f"cannot listen on 127.0.0.1:{port}: the port is in use")


@pytest.mark.parametrize("host", ["no-such-host.invalid", "256.1.1.1"])
def test_a_bad_host_is_one_line_and_exit_2(database_url: str, host: str) -> None:
    assert_one_line_exit_2(web(database_url, "--host", host, "--port", str(free_port())), "cannot listen on")


def test_akadze_web_logs_each_action(database_url: str) -> None:
    port = free_port()
    process = subprocess.Popen(
        [PYTHON, "-m", "akadze.cli", "web", APP, "--port", str(port)],
        cwd=ROOT,
        env=subprocess_env(database_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            while True:
                try:
                    page = client.get("/queues")
                    break
                except httpx.TransportError:
                    assert process.poll() is None, process.stdout.read() if process.stdout else ""
                    assert time.monotonic() < deadline, "akadze web did not start"
                    time.sleep(0.1)
            found = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
            assert found is not None
            done = client.post("/queues/default/pause", data={"csrf_token": found[1]})
            assert done.status_code == 303
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=20)
    assert process.returncode == 0, out
    assert "dashboard: pause queue='default' changed=True" in out, out
    assert "GET /queues" not in out  # requests are not logged, actions are
