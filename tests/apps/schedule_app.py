"""An app with schedules for worker subprocesses and the schedules CLI; the database comes from
AKADZE_DATABASE_URL when the app is made (``schedule_app:app_from_env``)."""

from __future__ import annotations

import os
from datetime import timedelta

from akadze import Akadze


def create_app(database_url: str) -> Akadze:
    app = Akadze(database_url=database_url, grace=timedelta(seconds=30))

    @app.periodic("every-second", every=timedelta(seconds=1), queue="ticks")
    async def every_second() -> None:
        return None

    @app.task("report")
    async def report(region: str) -> str:
        return region

    app.schedule("nightly-report", report, cron="30 2 * * *", tz="America/New_York", args={"region": "us"})
    return app


def app_from_env() -> Akadze:
    return create_app(os.environ["AKADZE_DATABASE_URL"])
