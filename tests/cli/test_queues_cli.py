"""akadze queues pause|resume NAME and akadze web: exit codes, what they say, what they change."""

from __future__ import annotations

import asyncio
import re
import subprocess
import time

import httpx
import pytest
from typer.testing import CliRunner

from akadze.cli import app as cli
from tests.support import PYTHON, ROOT, fetch, module_database, subprocess_env


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


def paused(database_url: str) -> list[str]:
    return [r["queue"] for r in asyncio.run(fetch(database_url, "SELECT queue FROM akadze_queue_pauses"))]


def test_pause_and_resume_exit_0_and_say_what_changed(database_url: str) -> None:
    runner = CliRunner()
    url = ["--database-url", database_url]
    first = runner.invoke(cli, ["queues", "pause", "mail", *url])
    assert (first.exit_code, first.output) == (0, "queue 'mail' paused\n")
    assert paused(database_url) == ["mail"]
    again = runner.invoke(cli, ["queues", "pause", "mail", *url])
    assert (again.exit_code, again.output) == (0, "queue 'mail' was already paused; nothing changed\n")
    resumed = runner.invoke(cli, ["queues", "resume", "mail", *url])
    assert (resumed.exit_code, resumed.output) == (0, "queue 'mail' resumed\n")
    assert paused(database_url) == []
    idle = runner.invoke(cli, ["queues", "resume", "mail", *url])
    assert (idle.exit_code, idle.output) == (0, "queue 'mail' was not paused; nothing changed\n")


def test_pause_without_a_database_or_with_a_bad_name_exits_2(database_url: str) -> None:
    runner = CliRunner()
    env = {"AKADZE_DATABASE_URL": "", "AKADZE_APP": ""}
    missing = runner.invoke(cli, ["queues", "pause", "mail"], env=env)
    assert missing.exit_code == 2 and "no database configured" in missing.output
    blank = runner.invoke(cli, ["queues", "pause", " ", "--database-url", database_url])
    assert blank.exit_code == 2 and "queue name" in blank.output


def test_akadze_web_serves_the_dashboard(database_url: str) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        [PYTHON, "-m", "akadze.cli", "web", "tests.apps.basic:app", "--port", str(port), "--read-only"],
        cwd=ROOT,
        env=subprocess_env(database_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/queues", timeout=2)
                break
            except httpx.TransportError:
                assert process.poll() is None, process.stdout.read() if process.stdout else ""
                assert time.monotonic() < deadline, "akadze web did not start"
                time.sleep(0.1)
        assert page.status_code == 200
        assert "read-only" in page.text and '<form method="post"' not in page.text
        assert httpx.post(f"http://127.0.0.1:{port}/queues/default/pause", timeout=5).status_code == 403
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=20)
    assert process.returncode == 0, out
    assert re.search(rf"akadze dashboard on http://127\.0\.0\.1:{port}/", out)
