"""Enqueue a few jobs, run them with the real worker code, and print what happened.

Run it with `bash scripts/example` (an embedded PostgreSQL when no database is configured).
"""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from decimal import Decimal

from sqlalchemy import text

from akadze.testing import drain
from examples.tasks import mail
from examples.worker_app import app


async def main() -> None:
    await app.migrate()
    async with app.engine.begin() as conn:
        await conn.execute(
            text(
                "CREATE TABLE IF NOT EXISTS example_reports "
                "(id bigint PRIMARY KEY, title text, total numeric)"
            )
        )
        await conn.execute(text("DELETE FROM example_reports"))
    send = app.get_task("mail.send")
    build = app.get_task("reports.build")

    # a producer's transaction: the job commits with the data, or not at all
    async with app.engine.begin() as conn:
        welcome = await send.using(session=conn).enqueue(
            to={"user_id": 1, "email": "ada@example.com"},
            template="welcome",
            tracking={"campaign": uuid.uuid4(), "sent_after": datetime.now(UTC)},
            flaky=True,
        )
    receipt = await send.enqueue(to={"user_id": 2, "email": "alan@example.com"}, template="receipt")
    report = await build.enqueue(report_id=7, spec={"title": "Q3", "total": Decimal("1234.50")})
    print(f"enqueued jobs {welcome.id}, {receipt.id}, {report.id}")

    # the real worker code, in-process: runs every ready job (the retry and the follow-up too)
    runs = await drain(app)
    print(f"ran {runs} runs; outbox: {mail.OUTBOX}")
    async with app.engine.connect() as conn:
        # this run's jobs: the three above and the follow-up the report enqueued (an earlier
        # run's jobs are still in the table, finished)
        rows = await conn.execute(
            text("SELECT id, task, state, attempt FROM akadze_jobs WHERE id >= :first ORDER BY id"),
            {"first": welcome.id},
        )
        for row in rows:
            print(f"  job {row.id:>3}  {row.task:<15} {row.state:<10} attempt {row.attempt}")
    await app.dispose()


if __name__ == "__main__":
    asyncio.run(main())
