"""The examples are executed, so the docs cannot rot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import asyncpg

from tests.conftest import _plain

ROOT = Path(__file__).resolve().parent.parent


async def test_quickstart_runs_every_job_and_chains_the_report_with_complete_tx(database_url: str) -> None:
    env = {**os.environ, "AKADZE_DATABASE_URL": database_url, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "examples.quickstart"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "receipt -> alan@example.com" in done.stdout
    conn = await asyncpg.connect(_plain(database_url))
    try:
        rows = await conn.fetch("SELECT task, state, attempt FROM akadze_jobs ORDER BY id")
        report = await conn.fetchrow("SELECT title, total FROM example_reports WHERE id = 7")
    finally:
        await conn.close()
    assert [(r["task"], r["state"]) for r in rows] == [
        ("mail.send", "succeeded"),
        ("mail.send", "succeeded"),
        ("reports.build", "succeeded"),
        ("reports.notify", "succeeded"),
    ]
    # the flaky send failed once, then succeeded: two attempts spent
    assert rows[0]["attempt"] == 2
    assert report["title"] == "Q3"
    assert str(report["total"]) == "1234.50"


def test_quickstart_run_twice_shows_only_the_second_runs_jobs(database_url: str) -> None:
    env = {**os.environ, "AKADZE_DATABASE_URL": database_url, "PYTHONPATH": str(ROOT)}

    def run() -> list[str]:
        done = subprocess.run(
            [sys.executable, "-m", "examples.quickstart"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    run()
    second = run()
    enqueued = next(line for line in second if line.startswith("enqueued jobs "))
    first_id = int(enqueued.removeprefix("enqueued jobs ").split(",")[0])
    listed = [line.split() for line in second if line.startswith("  job ")]
    # the three jobs enqueued and the report's follow-up, all of this run
    assert [row[2] for row in listed] == ["mail.send", "mail.send", "reports.build", "reports.notify"]
    assert all(int(row[1]) >= first_id for row in listed)
