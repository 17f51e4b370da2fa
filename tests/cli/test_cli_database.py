"""How a command finds its database as a new user gives it (issue 33): ``Akadze()`` from
AKADZE_DATABASE_URL, ``akadze worker --database-url``, the `akadze db migrate` an error asks for
naming the app or URL the command was given, and usage errors and help pages as plain lines."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from akadze import Akadze, JobState
from akadze.cli import app as cli
from tests.conftest import _admin, with_database
from tests.support import PYTHON, ROOT, subprocess_env


def akadze(*args: str, url: str | None, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """The installed command in a process of its own, AKADZE_DATABASE_URL set to ``url`` (or unset)."""
    env = subprocess_env(url or "")
    if url is None:
        del env["AKADZE_DATABASE_URL"]
    env.pop("AKADZE_APP", None)
    return subprocess.run(
        [PYTHON, "-m", "akadze.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def unmigrated(server_url: str) -> Iterator[str]:
    name = f"akadze_bare_{os.getpid()}"
    asyncio.run(_admin(server_url, f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}"'))
    yield with_database(server_url, name)
    asyncio.run(_admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def enqueue_double(url: str) -> int:
    async with Akadze(url) as producer:
        task = producer.task("bare.double")(lambda n: n)
        return (await task.enqueue(n=21)).id


async def job_state(url: str, job_id: int) -> tuple[JobState, object]:
    async with Akadze(url) as reader:
        job = await reader.get_job(job_id)
        assert job is not None
        return job.state, job.result


def test_worker_database_url_is_the_database_of_an_app_built_without_one(database_url: str) -> None:
    job_id = asyncio.run(enqueue_double(database_url))
    done = akadze("worker", "tests.apps.bare:app", "--database-url", database_url, "--burst", url=None)
    assert done.returncode == 0, done.stderr
    assert asyncio.run(job_state(database_url, job_id)) == (JobState.SUCCEEDED, 42)


def test_worker_database_url_beside_an_app_with_its_own_database_is_refused(
    database_url: str, tmp_path: Path
) -> None:
    """It would be ignored: the app's engine is built from the URL its code names."""
    (tmp_path / "ownapp.py").write_text(
        'from akadze import Akadze\napp = Akadze("postgresql://u@127.0.0.1:1/own")\n'
    )
    done = akadze("worker", "ownapp:app", "--database-url", database_url, "--burst", url=None, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: the app 'ownapp:app' is built with a database of its own, so "
        "--database-url would not apply; --database-url is for an app built with Akadze() alone, "
        "which reads AKADZE_DATABASE_URL"
    ]


def test_the_migrate_hint_names_the_app_or_url_the_command_was_given(unmigrated: str) -> None:
    """Not `akadze db migrate` alone, which would find no app and no database."""
    cases = [
        (("worker", "tests.apps.bare:app", "--burst"), unmigrated, "`akadze db migrate tests.apps.bare:app`"),
        (
            ("worker", "--app", "tests.apps.bare:app", "--database-url", unmigrated, "--burst"),
            None,
            "`akadze db migrate --app tests.apps.bare:app --database-url <the same URL>`",
        ),
        (
            ("jobs", "list", "--database-url", unmigrated),
            None,
            "`akadze db migrate --database-url <the same URL>`",
        ),
        (
            ("jobs", "list", "--app", "tests.apps.bare:app"),
            unmigrated,
            "`akadze db migrate --app tests.apps.bare:app`",
        ),
        (("jobs", "list"), unmigrated, "`akadze db migrate`"),
    ]
    for args, env_url, hint in cases:
        done = akadze(*args, url=env_url)
        assert done.returncode == 2, (args, done.stderr)
        [line] = done.stderr.strip().splitlines()
        assert line.startswith("error: ") and line.endswith(f"run {hint}"), (args, line)
        assert unmigrated not in line


def test_a_bad_option_value_is_one_line_naming_the_help() -> None:
    for args, line in [
        (
            ("worker", "tests.apps.bare:app", "--slots", "many"),
            "error: Invalid value for '--slots': Input should be a valid integer, unable to parse "
            "string as an integer (see `akadze worker --help`)",
        ),
        (
            ("jobs", "list", "--state", "done"),
            "error: Invalid value for '--state': 'done' is not one of 'queued', 'running', "
            "'succeeded', 'failed', 'cancelled'. (see `akadze jobs list --help`)",
        ),
        (
            ("wrker",),
            "error: No such command 'wrker'. Did you mean 'worker', 'workers'? (see `akadze --help`)",
        ),
    ]:
        result = CliRunner().invoke(cli, list(args))
        assert result.exit_code == 2, result.output
        assert result.stderr.splitlines() == [line]


def test_help_is_whole_and_plain() -> None:
    """Nothing cut to 80 columns with an ellipsis, and [brackets] shown as they are written."""
    result = CliRunner().invoke(cli, ["worker", "--help"], terminal_width=80)
    assert result.exit_code == 0, result.output
    assert "(needs akadze[prometheus])" in " ".join(result.output.split())
    assert "…" not in result.output and "..." not in result.output
    for option in ("--shutdown-timeout", "--log-tracebacks / --no-log-tracebacks", "AKADZE_METRICS_PORT"):
        assert option in result.output
    listing = CliRunner().invoke(cli, ["jobs", "--help"], terminal_width=80).output
    assert "explain  Say why a job is where it is, from the database alone\n" in listing
    assert "..." not in listing.split("Commands:")[1]
