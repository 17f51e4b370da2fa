"""What the dashboard's Chromium tests share: Debian's chromium driven by Playwright (no browser
download), a demo app seeded with jobs in every state, the dashboard served by uvicorn under
/ops as a service mounts it, and a tab whose page errors fail the test."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from akadze import Akadze
from akadze.testing import drain
from akadze.web import create_app
from akadze.worker import Worker
from tests.conftest import wait_until
from tests.support import execute, fetchval

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: .ci/run installs chromium and sets this: there a missing browser fails the tests, never skips them
REQUIRED = bool(os.environ.get("AKADZE_REQUIRE_BROWSER"))

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def demo_app(make_app: Callable[..., Akadze]) -> Akadze:
    app = make_app()

    # the bounced job's retry stays an hour away: a retry due within the default curve's
    # second would turn ready while a test counts the ready jobs
    @app.task("mail.send", queue="mail", max_attempts=5, backoff=lambda attempt: timedelta(hours=1))
    async def send(to: str, subject: str = "") -> None:
        if to.endswith("@bounce.test"):
            raise ConnectionError(f"550 mailbox unavailable: {to}")

    @app.task("reports.build", queue="reports", max_attempts=1)
    async def build(month: str) -> dict[str, int]:
        if month == "2026-13":
            raise ValueError("month must be 01..12")
        return {"rows": 1200}

    @app.task("images.resize", queue="images")
    async def resize(path: str, width: int) -> None:
        await asyncio.Event().wait()

    app.schedule("nightly-report", build, cron="0 3 * * *", args={"month": "2026-11"}, tz="Europe/Berlin")

    @app.periodic("cleanup", every=timedelta(minutes=15), queue="maintenance")
    async def cleanup() -> None: ...

    return app


async def seed(app: Akadze, database_url: str) -> dict[str, int]:
    """Jobs in every state, finished ones for the throughput, a schedule run, a failure."""
    send = app.get_task("mail.send")
    build = app.get_task("reports.build")
    await send.enqueue_many([{"to": f"user{n}@example.test", "subject": "Welcome"} for n in range(40)])
    await build.enqueue_many([{"month": f"2026-{m:02d}"} for m in range(1, 10)])
    failed = await build.enqueue(month="2026-13")
    await drain(app, queues=["mail", "reports"])
    bounced = await send.using(priority=5).enqueue(to="nobody@bounce.test", subject="Hi")
    await drain(app, queues=["mail"])  # fails once, waits an hour for its retry
    queued = await send.enqueue_many([{"to": f"late{n}@example.test"} for n in range(12)])
    delayed = await send.using(delay=timedelta(hours=2)).enqueue(to="later@example.test")
    nightly = await build.enqueue(month="2026-11")
    await execute(
        database_url,
        "INSERT INTO akadze_schedule_runs (schedule, fire_at, job_id) "
        f"VALUES ('nightly-report', date_trunc('day', now()) + interval '2 hours', {nightly.id})",
    )
    return {
        "failed": failed.id,
        "bounced": bounced.id,
        "queued": queued[0].id,
        "delayed": delayed.id,
    }


@pytest.fixture
async def served(make_app: Callable[..., Akadze], database_url: str) -> AsyncIterator[dict[str, Any]]:
    """The demo app seeded, a worker holding image jobs (the workers page), the dashboard served
    by uvicorn on a free port, mounted under /ops as a service would."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import Mount

    app = demo_app(make_app)
    ids = await seed(app, database_url)
    for n in range(2):
        await app.get_task("images.resize").enqueue(path=f"/photos/{n}.jpg", width=800)
    worker = Worker(app, queues=["images"], slots=4, name="worker-a")
    # the trends test rolls up itself: this worker's first pass, at a random moment of its first
    # minute, could set the mark before that test dates its jobs back, and leave them unrolled
    worker.services = [s for s in worker.services if getattr(s, "__name__", "") != "trends"]
    serving = asyncio.create_task(worker.run(handle_signals=False))
    await wait_until(
        lambda: fetchval(database_url, "SELECT count(*) = 2 FROM akadze_jobs WHERE state = 'running'")
    )
    port = free_port()
    outer = Starlette(routes=[Mount("/ops", app=create_app(app))])
    server = uvicorn.Server(uvicorn.Config(outer, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    await wait_until(lambda: server.started)
    try:
        yield {"app": app, "url": f"http://127.0.0.1:{port}/ops", "ids": ids, "db": database_url}
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 10)
        worker.stop(now=True)
        await asyncio.wait_for(serving, 20)


class Tabs:
    """Opens tabs in contexts of the one browser (a viewport, a colour scheme, a time zone each);
    every page error, console error and HTTP error of any of them fails the test."""

    def __init__(self, browser: Any) -> None:
        self.browser = browser
        self.errors: list[str] = []

    async def open(self, **context: Any) -> Any:
        options: dict[str, Any] = {"viewport": {"width": 1280, "height": 800}, **context}
        tab = await (await self.browser.new_context(**options)).new_page()
        tab.on("pageerror", lambda exc: self.errors.append(str(exc)))
        tab.on("console", lambda msg: self.errors.append(msg.text) if msg.type == "error" else None)
        tab.on("response", lambda r: self.errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        return tab


@pytest.fixture
async def tabs() -> AsyncIterator[Tabs]:
    if CHROMIUM is None:
        pytest.fail("AKADZE_REQUIRE_BROWSER is set and no chromium is on PATH (apt-get install chromium)")
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        opened = Tabs(browser)
        try:
            yield opened
        finally:
            await browser.close()
        assert opened.errors == [], opened.errors


@pytest.fixture
async def page(tabs: Tabs) -> Any:
    """A tab 1280 px wide, light, in UTC."""
    return await tabs.open()


def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("AKADZE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder
