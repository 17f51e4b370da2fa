"""The dashboard end to end in a real headless Chromium (Debian's chromium, driven by
Playwright for Python with executable_path: no browser download): every page renders and is
photographed, and clicks on cancel, requeue, pause and a bulk action change the database.

Skips only when chromium or playwright is absent. With AKADZE_SCREENSHOTS=DIR (``make
screenshots``) the pictures go to DIR (docs/dashboard/), otherwise to the test's tmp dir.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support import fetchval
from tests.web.browser import CHROMIUM, REQUIRED, page, served, shots, tabs

__all__ = ["page", "served", "tabs"]  # fixtures
pytestmark = pytest.mark.skipif(
    CHROMIUM is None and not REQUIRED, reason="no chromium on PATH (apt-get install chromium)"
)


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
    assert "The job is cancelled: it will not run." in await page.inner_text(".notice")

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
    await page.wait_for_url("**/jobs?state=queued&task=&queue=mail*")
    await page.click("a:has-text('Cancel…')")
    assert int(await page.inner_text("#bulk-count")) == expected
    await page.click(f"button:has-text('Cancel {expected} job')")
    await page.wait_for_url("**done=bulk-cancel*")
    assert f"Cancel requested for {expected} of {expected}" in await page.inner_text(".notice")
    assert (
        await fetchval(db, "SELECT count(*) FROM akadze_jobs WHERE queue = 'mail' AND state = 'queued'") == 0
    )
