"""User errors on the command line: exit 2 and one line saying what to fix, never a traceback."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from collections.abc import Callable

import asyncpg
import pytest
from typer.testing import CliRunner, Result

from akadze.cli import app as cli
from tests.conftest import with_database
from tests.support import PYTHON, ROOT, plain, subprocess_env


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    base = {"AKADZE_DATABASE_URL": "", "AKADZE_APP": ""}
    return CliRunner().invoke(cli, list(args), env={**base, **(env or {})})


def assert_one_line(result: Result, code: int, *words: str) -> None:
    assert result.exit_code == code, (result.exit_code, result.output, result.exception)
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("path", "words"),
    [
        ("tests.apps.does_not_exist:app", ("cannot import", "tests.apps.does_not_exist")),
        ("tests.apps.basic", ("must be module:attr",)),
        ("tests.apps.basic:nothing_here", ("has no attribute", "nothing_here")),
        ("tests.apps.no_register:REGISTER", ("not an Akadze application",)),
        ("tests.apps.basic:create_app", ("create_app",)),
        ("tests.apps.broken:app", ("RuntimeError", "SETTINGS_MODULE is not set")),
    ],
    ids=[
        "unknown-module",
        "no-attribute-part",
        "unknown-attribute",
        "not-an-app",
        "factory-that-needs-arguments",
        "module-that-raises-on-import",
    ],
)
def test_an_unknown_app_path_exits_2_with_one_line(path: str, words: tuple[str, ...]) -> None:
    for args in (("worker", path), ("jobs", "list", "--app", path)):
        assert_one_line(run(*args), 2, *words)


def test_no_database_configured_exits_2_with_one_line() -> None:
    for args in (("jobs", "list"), ("jobs", "show", "1"), ("jobs", "cancel", "1"), ("jobs", "requeue", "1")):
        assert_one_line(run(*args), 2, "no database configured", "--database-url", "AKADZE_DATABASE_URL")
    assert_one_line(run("db", "migrate"), 2, "no database configured")


def test_no_app_named_for_the_worker_exits_2_with_one_line() -> None:
    assert_one_line(run("worker"), 2, "name the app")


@pytest.mark.parametrize(
    "url",
    [
        pytest.param(
            lambda server: f"postgresql://postgres@127.0.0.1:{closed_port()}/postgres", id="closed-port"
        ),
        pytest.param(
            lambda server: "postgresql://postgres@no-such-host.invalid:5432/postgres", id="unknown-host"
        ),
        pytest.param(lambda server: with_database(server, "akadze_no_such_database"), id="unknown-database"),
        pytest.param(
            lambda server: server.replace("postgres@", "akadze_no_such_role@", 1),
            id="unknown-role",
        ),
    ],
)
def test_an_unreachable_database_exits_2_with_one_line(server_url: str, url: Callable[[str], str]) -> None:
    target = url(server_url)
    for args in (("jobs", "list"), ("db", "migrate"), ("jobs", "cancel", "1")):
        assert_one_line(run(*args, "--database-url", target), 2, "database")


async def test_a_database_without_the_schema_says_to_migrate(server_url: str) -> None:
    name = f"akadze_unmigrated_{os.getpid()}"
    admin = await asyncpg.connect(plain(server_url))
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')
        for args in (("jobs", "list"), ("jobs", "show", "1"), ("jobs", "cancel", "1")):
            result = await asyncio.to_thread(run, *args, "--database-url", with_database(server_url, name))
            assert_one_line(result, 2, "akadze db migrate")
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


def test_a_url_that_is_not_postgres_exits_2_with_one_line() -> None:
    assert_one_line(run("jobs", "list", "--database-url", "mysql://x@localhost/db"), 2, "PostgreSQL")


@pytest.mark.parametrize(
    "args",
    [
        ("jobs", "show", "not-a-number"),
        ("jobs", "cancel"),
        ("worker", "tests.apps.basic:app", "--slots", "0"),
        ("jobs", "list", "--limit", "0"),
        ("no-such-command",),
    ],
    ids=["id-not-a-number", "id-missing", "no-slots", "limit-zero", "unknown-command"],
)
def test_bad_usage_exits_2_without_a_traceback(args: tuple[str, ...]) -> None:
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output


def test_a_real_process_prints_one_line_and_no_traceback(database_url: str) -> None:
    """The same, end to end: the installed entry point, stderr as the user sees it."""
    port = closed_port()
    done = subprocess.run(
        [PYTHON, "-m", "akadze.cli", "jobs", "list", "--database-url", f"postgresql://u@127.0.0.1:{port}/db"],
        cwd=ROOT,
        env=subprocess_env(database_url),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("codegen", "no_such_module:app", "--out", "clients"),
        ("codegen", "generate", "no_such_module:app", "--out", "clients", "--check"),
        ("codegen", "diff", "no_such_module:app", "--against", "tests/codegen/golden/wire"),
    ],
    ids=["codegen", "codegen-check", "codegen-diff"],
)
def test_codegen_of_a_missing_module_is_one_line_naming_it(args: tuple[str, ...]) -> None:
    """Not a traceback, and not the hint about side effects at import: there is no module."""
    result = run(*args)
    assert_one_line(result, 2, "cannot import", "'no_such_module'")
    assert "side effects" not in result.output and "is_codegen" not in result.output


def test_a_replica_url_beside_an_app_exits_2_with_one_line() -> None:
    """An app reads from the replica it was built with: a second one on the command line
    would be ignored, so it is refused."""
    result = run("jobs", "list", "--app", "tests.apps.basic:app", "--read-database-url", "postgresql://r/db")
    assert_one_line(result, 2, "--read-database-url goes with --database-url", "read_database_url")
