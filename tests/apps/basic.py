"""A small app for worker subprocesses and CLI tests; the database comes from AKADZE_DATABASE_URL."""

from __future__ import annotations

import os

from sqlalchemy import text

from akadze import Akadze, current


def create_app(database_url: str) -> Akadze:
    app = Akadze(database_url=database_url)

    @app.task("basic.record")
    async def record(label: str) -> str:
        """Writes its job id into the ``recorded`` table (the test creates it), with the outcome."""
        async with current().complete_tx() as conn:
            await conn.execute(
                text("INSERT INTO recorded (job_id, label) VALUES (:id, :label)"),
                {"id": current().job.id, "label": label},
            )
        return label

    @app.task("basic.fail", max_attempts=1)
    async def fail(reason: str) -> None:
        raise RuntimeError(reason)

    return app


app = create_app(os.environ.get("AKADZE_DATABASE_URL") or "postgresql://localhost/akadze_unset")


def from_environment() -> Akadze:
    """For ``--app tests.apps.basic:from_environment``: a fresh app on BASIC_APP_DATABASE_URL."""
    return create_app(os.environ["BASIC_APP_DATABASE_URL"])
