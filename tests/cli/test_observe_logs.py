"""akadze worker --log-format json: one JSON object per line, with the transition fields; a
failed run at WARNING with its error, a job failed for good at ERROR, tracebacks on request."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from typing import Any

import asyncpg
import pytest

from akadze.events.logs import JsonFormatter
from tests.support import module_database


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    return module_database(request, server_url, template_db)


def plain(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://")


def insert(url: str, reason: str, max_attempts: int) -> None:
    async def go() -> None:
        conn = await asyncpg.connect(plain(url))
        try:
            await conn.execute(
                "INSERT INTO akadze_jobs (task, queue, args, max_attempts) "
                "VALUES ('basic.fail', 'default', $1, $2)",
                json.dumps({"reason": reason}),
                max_attempts,
            )
        finally:
            await conn.close()

    asyncio.run(go())


def worker(url: str, *options: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "AKADZE_LOG_FORMAT"}
    environment |= {"AKADZE_DATABASE_URL": url, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "akadze.cli", "worker", "tests.apps.basic:app", "--burst", *options],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )


def json_lines(stderr: str) -> list[dict[str, Any]]:
    lines = [line for line in stderr.splitlines() if line.strip()]
    return [json.loads(line) for line in lines]  # every line is one JSON object


def test_json_lines_carry_the_transition_fields_and_the_levels(database_url: str) -> None:
    insert(database_url, "retry me", 2)
    insert(database_url, "give up", 1)
    result = worker(database_url, "--log-format", "json")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    lines = json_lines(result.stderr)
    assert all({"ts", "level", "logger", "message"} <= set(line) for line in lines)
    assert all(line["ts"].endswith("Z") for line in lines)
    transitions = [line for line in lines if "job_id" in line]
    by_level = {line["level"]: line for line in transitions}
    warning, error = by_level["WARNING"], by_level["ERROR"]
    assert {k: warning[k] for k in ("task", "queue", "state", "attempt", "outcome")} == {
        "task": "basic.fail",
        "queue": "default",
        "state": "queued",
        "attempt": 1,
        "outcome": "retried",
    }
    assert (warning["error_type"], warning["error_message"]) == ("RuntimeError", "retry me")
    assert isinstance(warning["duration_ms"], float)
    assert (error["state"], error["outcome"], error["error_message"]) == ("failed", "failed", "give up")
    assert error["logger"] == "akadze.worker"
    # the traceback only on request
    assert not any("traceback" in line for line in lines)


def test_tracebacks_on_request_and_the_environment_variable(database_url: str) -> None:
    insert(database_url, "with a trace", 1)
    result = worker(database_url, "--log-tracebacks", env={"AKADZE_LOG_FORMAT": "json"})
    assert result.returncode == 0, result.stderr
    lines = json_lines(result.stderr)
    traced = [line for line in lines if "traceback" in line]
    assert len(traced) == 1
    assert traced[0]["level"] == "DEBUG" and traced[0]["logger"] == "akadze.worker.traceback"
    assert "RuntimeError: with a trace" in traced[0]["traceback"]
    # nothing else at DEBUG
    assert {line["level"] for line in lines if line is not traced[0]} <= {"INFO", "WARNING", "ERROR"}


def test_text_stays_the_default_and_a_bad_format_exits_2(database_url: str) -> None:
    insert(database_url, "plain", 1)
    result = worker(database_url)
    assert result.returncode == 0, result.stderr
    assert " ERROR akadze.worker job_id=" in result.stderr
    assert "error=RuntimeError: plain" in result.stderr
    bad = worker(database_url, "--log-format", "yaml")
    assert bad.returncode == 2


def test_the_formatter_keeps_newlines_and_exceptions_inside_one_line() -> None:
    record = logging.LogRecord("akadze.worker", logging.WARNING, __file__, 1, "two\nlines %s", ("x",), None)
    record.job_id = 5
    line = JsonFormatter().format(record)
    assert "\n" not in line
    assert json.loads(line)["message"] == "two\nlines x" and json.loads(line)["job_id"] == 5


def test_a_failed_run_is_logged_at_warning_level_too(database_url: str) -> None:
    """At --log-level WARNING (no transition line at INFO), a job failed for good still logs its
    ERROR line with the error: the events of failed runs are published below INFO."""
    insert(database_url, "still seen", 1)
    result = worker(database_url, "--log-level", "WARNING", "--log-format", "json")
    assert result.returncode == 0, result.stderr
    lines = json_lines(result.stderr)
    assert [(line["level"], line["error_message"]) for line in lines if "job_id" in line] == [
        ("ERROR", "still seen")
    ]
