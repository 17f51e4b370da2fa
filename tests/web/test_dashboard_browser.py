"""The dashboard end to end in a real headless Chromium (Debian's chromium, driven by
Playwright for Python with executable_path: no browser download): every page renders and is
photographed, and clicks on cancel, requeue, pause and a bulk action change the database.

Skips only when chromium or playwright is absent. With AKADZE_SCREENSHOTS=DIR (``make
screenshots``) the pictures go to DIR (docs/dashboard/), otherwise to the test's tmp dir.
"""

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
pytestmark = pytest.mark.skipif(
    CHROMIUM is None and not REQUIRED, reason="no chromium on PATH (apt-get install chromium)"
)

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


@pytest.fixture
async def page(tmp_path: Path) -> AsyncIterator[Any]:
    if CHROMIUM is None:
        pytest.fail("AKADZE_REQUIRE_BROWSER is set and no chromium is on PATH (apt-get install chromium)")
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        context = await browser.new_context(viewport={"width": 1280, "height": 800})
        tab = await context.new_page()
        errors: list[str] = []
        tab.on("pageerror", lambda exc: errors.append(str(exc)))
        tab.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        tab.on("response", lambda r: errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        try:
            yield tab
        finally:
            await browser.close()
        assert errors == [], errors


def shots(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("AKADZE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.mark.timeout(180)
async def test_every_page_renders_in_chromium_and_is_photographed(
    served: dict[str, Any], page: Any, tmp_path: Path
) -> None:
    url, ids, folder = served["url"], served["ids"], shots(tmp_path)
    await served["app"].pause_queue("maintenance")  # the pictures show both states
    pages = {
        "overview": ("/", "Overview"),
        "jobs": ("/jobs", "Jobs"),
        "jobs-failed": ("/jobs?state=failed", "Jobs"),
        "job": (f"/jobs/{ids['bounced']}", f"Job {ids['bounced']}"),
        "job-args": (f"/jobs/{ids['failed']}?show=args", f"Job {ids['failed']}"),
        "queues": ("/queues", "Queues"),
        "schedules": ("/schedules", "Schedules"),
        "workers": ("/workers", "Workers"),
        "bulk": ("/jobs/bulk?action=cancel&queue=mail", "Cancel the selected jobs"),
    }
    for name, (path, heading) in pages.items():
        response = await page.goto(url + path)
        assert response is not None and response.status == 200, path
        assert heading in await page.inner_text("h1"), path
        # the stylesheet loaded from the package (no CDN): the header is dark
        assert (
            await page.eval_on_selector("header", "e => getComputedStyle(e).backgroundColor")
            == "rgb(23, 32, 46)"
        )
        # the long listing is cut at the window; a job's page is taken whole
        await page.screenshot(
            path=str(folder / f"{name}.png"), full_page=name.startswith("job-") or name == "job"
        )
    await page.goto(url + "/workers")
    assert "2 / 4" in await page.inner_text("table")


@pytest.mark.timeout(180)
async def test_the_overview_refreshes_itself(served: dict[str, Any], page: Any) -> None:
    url, app = served["url"], served["app"]
    await page.goto(url + "/")
    before = await page.inner_text("#live .card .figure")
    await app.get_task("mail.send").enqueue_many([{"to": f"x{n}@example.test"} for n in range(7)])
    # no reload: the page's script fetches the live part again
    await page.wait_for_function(
        "n => document.querySelector('#live .card .figure').textContent !== n", arg=before, timeout=15000
    )
    assert int(await page.inner_text("#live .card .figure")) == int(before) + 7


@pytest.mark.timeout(180)
async def test_clicks_cancel_requeue_pause_and_bulk_change_the_database(
    served: dict[str, Any], page: Any
) -> None:
    url, ids, db = served["url"], served["ids"], served["db"]

    async def state(job_id: int) -> str:
        value: str = await fetchval(db, "SELECT state FROM akadze_jobs WHERE id = $1", job_id)
        return value

    # cancel a queued job from its page
    await page.goto(f"{url}/jobs/{ids['queued']}")
    await page.click("button:has-text('Cancel')")
    await page.wait_for_url(f"**/jobs/{ids['queued']}?done=cancel")
    assert await state(ids["queued"]) == "cancelled"
    assert "Cancel requested" in await page.inner_text(".notice")

    # requeue a failed job
    await page.goto(f"{url}/jobs/{ids['failed']}")
    await page.click("button:has-text('Requeue')")
    await page.wait_for_url(f"**/jobs/{ids['failed']}?done=requeue")
    assert await state(ids["failed"]) == "queued"

    # run a delayed job now
    await page.goto(f"{url}/jobs/{ids['delayed']}")
    await page.click("button:has-text('Run now')")
    await page.wait_for_url("**?done=run-now")
    assert await fetchval(db, "SELECT run_at <= now() FROM akadze_jobs WHERE id = $1", ids["delayed"])

    # pause, then resume, the mail queue
    await page.goto(f"{url}/queues")
    await page.click("#queue-mail button:has-text('Pause')")
    await page.wait_for_url("**/queues?done=paused*")
    assert await fetchval(db, "SELECT count(*) FROM akadze_queue_pauses WHERE queue = 'mail'") == 1
    assert "paused" in await page.inner_text("#queue-mail")
    await page.click("#queue-mail button:has-text('Resume')")
    await page.wait_for_url("**/queues?done=resumed*")
    assert await fetchval(db, "SELECT count(*) FROM akadze_queue_pauses") == 0

    # bulk: cancel what the filter queue=mail, state=queued selects, after the count
    expected = await fetchval(
        db, "SELECT count(*) FROM akadze_jobs WHERE queue = 'mail' AND state = 'queued'"
    )
    await page.goto(f"{url}/jobs")
    await page.select_option("select[name=state]", "queued")
    await page.fill("input[name=queue]", "mail")
    await page.click("button:has-text('Filter')")
    await page.wait_for_url("**/jobs?state=queued&task=&queue=mail")
    await page.click("a:has-text('Cancel…')")
    assert int(await page.inner_text("#bulk-count")) == expected
    await page.click(f"button:has-text('Cancel {expected} job')")
    await page.wait_for_url("**done=bulk-cancel*")
    assert f"Cancel requested for {expected} of {expected}" in await page.inner_text(".notice")
    assert (
        await fetchval(db, "SELECT count(*) FROM akadze_jobs WHERE queue = 'mail' AND state = 'queued'") == 0
    )
