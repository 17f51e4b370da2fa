"""examples/producer: the service enqueues through its checked-in clients only, and the example
worker runs every job (the test command also runs ``akadze codegen --check`` on those clients)."""

from __future__ import annotations

import os
import subprocess
import sys

from sqlalchemy import text

from akadze import Akadze
from akadze.testing import drain
from akadze_codegen.emit import render
from akadze_codegen.signature import decode_manifest
from tests.codegen.checkers import PRODUCER, ROOT
from tests.support import fetch


def test_the_checked_in_clients_match_their_manifest() -> None:
    clients = PRODUCER / "clients"
    files = render(decode_manifest((clients / "_manifest.json").read_bytes()))
    assert {name: (clients / name).read_bytes() for name in files} == files


async def test_the_producer_service_enqueues_and_the_example_worker_runs_every_job(database_url: str) -> None:
    done = subprocess.run(
        [sys.executable, str(PRODUCER / "service.py")],
        cwd=ROOT,
        # the service's own directory (sys.path[0]) gives it `clients`; no worker code is imported
        env={**os.environ, "AKADZE_DATABASE_URL": database_url, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("enqueued job") == 4

    app = Akadze(database_url=database_url)
    try:
        app.include("examples.tasks.mail")
        app.include("examples.tasks.reports")
        async with app.engine.begin() as conn:
            await conn.execute(
                text("CREATE TABLE example_reports (id bigint PRIMARY KEY, title text, total numeric)")
            )
        await drain(app)
    finally:
        await app.dispose()
    rows = await fetch(database_url, "SELECT task, state, priority, args_fp FROM akadze_jobs ORDER BY id")
    assert [(r["task"], r["state"]) for r in rows] == [
        ("mail.send", "succeeded"),
        ("reports.build", "succeeded"),
        ("mail.send", "succeeded"),
        ("mail.send", "succeeded"),
        ("reports.notify", "succeeded"),
    ]
    assert rows[1]["priority"] == 5
    assert rows[0]["args_fp"] == app.tasks["mail.send"].args_fp
    report = await fetch(database_url, "SELECT title, total FROM example_reports")
    assert [(r["title"], str(r["total"])) for r in report] == [("Q3", "1234.50")]
