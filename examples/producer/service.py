"""A producer service that enqueues jobs for ``examples.worker_app`` without importing it.

It imports only ``akadze`` and the generated package ``clients`` (checked in, regenerated with
``akadze codegen examples.worker_app:app --out examples/producer/clients``; the test command
fails when it is stale). Run it as a script, so that ``clients`` is importable and the
worker's modules are not::

    AKADZE_DATABASE_URL=postgresql://... python examples/producer/service.py
"""

from __future__ import annotations

import asyncio
import os
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from clients import mail, reports
from sqlalchemy.ext.asyncio import create_async_engine

import akadze.client
from akadze.app import normalize_url
from akadze.job import Job


async def enqueue_all(database_url: str) -> list[Job]:
    """Enqueue one of each kind of job; returns them in order."""
    akadze.client.configure(database_url=database_url)
    jobs: list[Job] = []
    try:
        # the simplest form: the configured database, the task's own queue and options
        jobs.append(
            await mail.mail_send.enqueue(
                to=mail.Recipient(user_id=1, email="ada@example.com", name="Ada"),
                template=mail.Template.WELCOME,
                tracking=mail.Tracking(campaign=uuid.uuid4(), sent_after=datetime.now(UTC)),
            )
        )
        # in the producer's own transaction: the job commits with its data, or not at all
        engine = create_async_engine(normalize_url(database_url))
        try:
            async with engine.begin() as conn:
                jobs.append(
                    await reports.reports_build.using(session=conn, priority=5).enqueue(
                        report_id=7, spec=reports.ReportSpec(title="Q3", total=Decimal("1234.50"))
                    )
                )
        finally:
            await engine.dispose()
        # many jobs of one task in one statement; a delay applies to all of them
        jobs.extend(
            await mail.mail_send.using(delay=timedelta(0)).enqueue_many(
                [
                    {
                        "to": mail.Recipient(user_id=2, email="alan@example.com"),
                        "template": mail.Template.RECEIPT,
                    },
                    {
                        "to": mail.Recipient(user_id=3, email="grace@example.com"),
                        "template": mail.Template.RECEIPT,
                    },
                ]
            )
        )
    finally:
        await akadze.client.dispose()
    return jobs


async def main() -> None:
    jobs = await enqueue_all(os.environ["AKADZE_DATABASE_URL"])
    for job in jobs:
        print(f"enqueued job {job.id}: {job.task} on {job.queue} (schema {job.args_fp})")


if __name__ == "__main__":
    asyncio.run(main())
