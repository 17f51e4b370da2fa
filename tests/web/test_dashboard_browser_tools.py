"""The dashboard's second step in a real headless Chromium: a phone's width (390 px, photographed
into docs/dashboard/), long names at 1280 px, finding a job from the header and by search, the
trends' charts, the time zone chosen in the header, jobs ticked for a bulk action, finished jobs
deleted by filter, pausing the live updates, dark mode and visible focus. What the pages show and
every action are checked in the database.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from akadze.worker.trends import roll_up
from tests.support import execute, fetch, fetchval
from tests.web.browser import CHROMIUM, REQUIRED, Tabs, served, shots, tabs

__all__ = ["served", "tabs"]  # fixtures
pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None and not REQUIRED, reason="no chromium on PATH (apt-get install chromium)"
    ),
    pytest.mark.timeout(240),
]

PAGES = [
    "/",
    "/jobs",
    "/jobs?state=failed",
    "/trends",
    "/queues",
    "/schedules",
    "/workers",
    "/jobs/bulk?action=cancel",
]
LONG_TASK = "reports.monthly_" + "aggregation_of_every_customer_invoice_" * 3
LONG_QUEUE = "q-with-a-long-name-" + "x" * 40


async def test_a_phone_gets_the_page_at_its_width_with_the_header_across_it(
    served: dict[str, Any], tabs: Tabs, tmp_path: Path
) -> None:
    url, folder = served["url"], shots(tmp_path)
    phone = await tabs.open(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    for path in [*PAGES, f"/jobs/{served['ids']['bounced']}"]:
        await phone.goto(url + path)
        laid = await phone.evaluate(
            """() => {
                const header = document.querySelector('header').getBoundingClientRect();
                const shown = 'header a, header button:not([hidden]), header select';
                const links = [...document.querySelectorAll(shown)].map(e => e.getBoundingClientRect());
                return {
                    inner: window.innerWidth,
                    scale: window.visualViewport.scale,
                    page: document.documentElement.scrollWidth,
                    header: [header.left, header.right, header.top, header.bottom],
                    outside: links.filter(r => r.left < header.left || r.right > header.right
                        || r.top < header.top || r.bottom > header.bottom).length,
                };
            }"""
        )
        # not laid out wide and zoomed out: the page is the phone's width, at scale 1
        assert (laid["inner"], laid["scale"]) == (390, 1), (path, laid)
        assert laid["page"] <= 390, (path, laid)
        # the dark band spans the screen and holds every link of the header
        assert laid["header"][0] == 0 and laid["header"][1] == 390, (path, laid)
        assert laid["outside"] == 0, (path, laid)
    for name, path in (("phone-overview", "/"), ("phone-jobs", "/jobs")):
        await phone.goto(url + path)
        await phone.screenshot(path=str(folder / f"{name}.png"))


async def test_long_names_never_split_an_id_or_a_state_at_1280(served: dict[str, Any], tabs: Tabs) -> None:
    await execute(
        served["db"],
        "INSERT INTO akadze_jobs (id, task, queue, args) "
        f"VALUES (1748, '{LONG_TASK}', '{LONG_QUEUE}', '{{}}'), (1749, '{LONG_TASK}', 'mail', '{{}}')",
    )
    wide = await tabs.open(viewport={"width": 1280, "height": 800})
    await wide.goto(served["url"] + "/jobs")
    lines = await wide.evaluate(
        """() => [...document.querySelectorAll("tbody a[href*='/jobs/'], tbody .state, td.time time")]
            .map(e => [e.textContent, e.getClientRects().length])"""
    )
    assert lines and all(count == 1 for _, count in lines), lines
    assert await wide.evaluate("document.documentElement.scrollWidth") <= 1280


async def test_a_job_is_found_from_the_header_and_by_search(served: dict[str, Any], tabs: Tabs) -> None:
    url, ids, db = served["url"], served["ids"], served["db"]
    tab = await tabs.open()
    await tab.goto(url + "/workers")
    await tab.fill("#find-id", str(ids["failed"]))
    await tab.press("#find-id", "Enter")
    await tab.wait_for_url(f"**/jobs/{ids['failed']}")
    assert f"Job {ids['failed']}" in await tab.inner_text("h1")
    # error text, then an argument value: each list is what the database holds
    await tab.goto(url + "/jobs")
    await tab.fill("input[name=error]", "mailbox unavailable")
    await tab.click("button:has-text('Filter')")
    await tab.wait_for_url("**error=mailbox*")
    shown = [int(t) for t in await tab.locator("td.id a").all_inner_texts()]
    expected = await fetch(
        db, "SELECT id FROM akadze_jobs WHERE errors::text LIKE '%mailbox unavailable%' ORDER BY id DESC"
    )
    assert shown == [row["id"] for row in expected] == [ids["bounced"]]
    await tab.fill("input[name=error]", "")
    await tab.fill("input[name=arg]", "month=2026-13")
    await tab.click("button:has-text('Filter')")
    await tab.wait_for_url("**arg=month*")
    assert [int(t) for t in await tab.locator("td.id a").all_inner_texts()] == [ids["failed"]]
    assert "Searched" in await tab.inner_text("#searched")


async def test_the_time_zone_chosen_in_the_header_applies_to_every_time(
    served: dict[str, Any], tabs: Tabs
) -> None:
    url, ids, db = served["url"], served["ids"], served["db"]
    await execute(
        db, f"UPDATE akadze_jobs SET created_at = '2026-07-01T12:00:00Z' WHERE id = {ids['failed']}"
    )
    tab = await tabs.open(timezone_id="Asia/Tokyo")
    await tab.goto(f"{url}/jobs/{ids['failed']}")
    created = tab.locator("dd time").first
    assert await created.inner_text() == "2026-07-01 12:00:00Z"  # UTC by default
    # the browser's own zone is offered, and choosing it reloads this page in it
    await tab.select_option("#tz-choice", "Asia/Tokyo")
    await tab.wait_for_url(f"**/jobs/{ids['failed']}")
    await tab.wait_for_selector("#tz-choice option[value='Asia/Tokyo'][selected]", state="attached")
    assert await tab.locator("dd time").first.inner_text() == "2026-07-01 21:00:00 JST"
    assert await tab.locator("dd time").first.get_attribute("datetime") == "2026-07-01T12:00:00Z"
    await tab.goto(url + "/jobs")
    assert "JST" in await tab.locator("td.time time").first.inner_text()


async def test_ticked_jobs_are_cancelled_and_finished_ones_deleted_by_filter(
    served: dict[str, Any], tabs: Tabs
) -> None:
    url, db = served["url"], served["db"]
    tab = await tabs.open()
    await tab.goto(url + "/jobs?state=queued&queue=mail")
    boxes = tab.locator("td.pick input[type=checkbox]")
    picked = [int(await boxes.nth(n).get_attribute("value") or 0) for n in (0, 2)]
    for n in (0, 2):
        await boxes.nth(n).check()
    await tab.click("button:has-text('Cancel selected…')")
    await tab.wait_for_url("**/jobs/bulk?*")
    assert await tab.inner_text("#bulk-count") == "2"
    await tab.click("button:has-text('Cancel 2 jobs')")
    await tab.wait_for_url("**done=bulk-cancel*")
    states = dict(
        await fetch(db, "SELECT id, state FROM akadze_jobs WHERE queue = 'mail' AND id = ANY($1)", picked)
    )
    assert states == {picked[0]: "cancelled", picked[1]: "cancelled"}
    assert await fetchval(db, "SELECT count(*) FROM akadze_jobs WHERE state = 'cancelled'") == 2
    # delete the succeeded reports by filter, after the count
    expected = await fetchval(
        db, "SELECT count(*) FROM akadze_jobs WHERE task = 'reports.build' AND state = 'succeeded'"
    )
    await tab.goto(url + "/jobs?state=succeeded&task=reports.build")
    await tab.click("a:has-text('Delete finished…')")
    assert int(await tab.inner_text("#bulk-count")) == expected > 0
    await tab.click(f"button:has-text('Delete {expected} jobs')")
    await tab.wait_for_url("**done=bulk-delete*")
    assert f"Deleted {expected} of {expected}" in await tab.inner_text(".notice")
    assert (
        await fetchval(
            db, "SELECT count(*) FROM akadze_jobs WHERE task = 'reports.build' AND state = 'succeeded'"
        )
        == 0
    )
    assert (
        await fetchval(
            db, "SELECT count(*) FROM akadze_jobs WHERE task = 'reports.build' AND state = 'failed'"
        )
        == 1
    )


async def test_live_updates_pause_and_resume_from_the_header(served: dict[str, Any], tabs: Tabs) -> None:
    url, app = served["url"], served["app"]
    tab = await tabs.open()
    fetched: list[str] = []
    tab.on("request", lambda r: fetched.append(r.url) if "fragment=live" in r.url else None)
    await tab.goto(url + "/")
    before = await tab.inner_text("#live .card .figure")
    await tab.click("#live-toggle")
    assert await tab.get_attribute("#live-toggle", "aria-pressed") == "true"
    assert await tab.inner_text("#live-status") == "Live updates paused"
    fetched.clear()
    await app.get_task("mail.send").enqueue_many([{"to": f"p{n}@example.test"} for n in range(3)])
    await tab.wait_for_timeout(7000)  # more than two refresh periods: none is fetched
    assert fetched == [] and await tab.inner_text("#live .card .figure") == before
    # the choice holds across pages of this browser
    await tab.goto(url + "/queues")
    assert await tab.get_attribute("#live-toggle", "aria-pressed") == "true"
    await tab.goto(url + "/")
    await tab.click("#live-toggle")
    await tab.wait_for_function(
        "n => document.querySelector('#live .card .figure').textContent !== n", arg=before, timeout=15000
    )
    assert int(await tab.inner_text("#live .card .figure")) == int(before) + 3


async def test_dark_mode_follows_the_system_and_focus_is_visible(
    served: dict[str, Any], tabs: Tabs, tmp_path: Path
) -> None:
    dark = await tabs.open(color_scheme="dark")
    await dark.goto(served["url"] + "/jobs")
    background = await dark.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(16, 21, 29)", background
    light = await tabs.open(color_scheme="light")
    await light.goto(served["url"] + "/jobs")
    assert await light.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(247, 248, 250)"
    await dark.screenshot(path=str(shots(tmp_path) / "jobs-dark.png"))
    # the keyboard's focus shows: a skip link first, then every control has an outline
    await light.keyboard.press("Tab")
    assert await light.evaluate("document.activeElement.textContent") == "Skip to content"
    for _ in range(4):
        await light.keyboard.press("Tab")
        outline = await light.evaluate("getComputedStyle(document.activeElement).outlineStyle")
        width = await light.evaluate("parseFloat(getComputedStyle(document.activeElement).outlineWidth)")
        assert outline != "none" and width >= 2, (outline, width)


async def test_the_trends_chart_what_the_workers_rolled_up(
    served: dict[str, Any], tabs: Tabs, tmp_path: Path
) -> None:
    url, db, app = served["url"], served["db"], served["app"]
    # the seeded jobs finished a few minutes ago, over three minutes; then a worker's pass
    await execute(
        db,
        "UPDATE akadze_jobs SET started_at = now() - interval '8 minutes', "
        "finished_at = now() - interval '4 minutes' - make_interval(secs => CAST(id % 180 AS integer)) "
        "WHERE finished_at IS NOT NULL",
    )
    await roll_up(app.engine, settle_s=0)
    mark = await fetchval(db, "SELECT minutes_until FROM akadze_job_stats_mark")
    finished = dict(
        await fetch(db, "SELECT state, count(*) FROM akadze_jobs WHERE finished_at < $1 GROUP BY state", mark)
    )
    tab = await tabs.open(timezone_id="Asia/Tokyo")
    await tab.goto(url + "/trends")
    assert await tab.locator("figure.chart svg").count() == 3
    bars = await tab.locator("#chart-throughput rect").count()
    assert bars >= 1
    # each bar of a slot says the whole slot: one tooltip per slot
    tips = set(await tab.locator("#chart-throughput rect title").all_text_contents())
    shown = {"succeeded": 0, "failed": 0, "cancelled": 0}
    for tip in tips:
        for count, state in [part.split(" ") for part in tip.split(": ", 1)[1].split(", ")]:
            shown[state] += int(count)
    assert {k: v for k, v in shown.items() if v} == finished, (shown, finished)
    await tab.screenshot(path=str(shots(tmp_path) / "trends.png"), full_page=True)
    # the per-task table, one task at a time, each as the database counts it
    await tab.fill("input[name=task]", "reports.build")
    await tab.click("button:has-text('Show')")
    await tab.wait_for_url("**task=reports.build*")
    reports = await fetchval(
        db, "SELECT count(*) FROM akadze_jobs WHERE task = 'reports.build' AND finished_at < $1", mark
    )
    tips = set(await tab.locator("#chart-throughput rect title").all_text_contents())
    assert (
        sum(int(part.split(" ")[0]) for tip in tips for part in tip.split(": ", 1)[1].split(", ")) == reports
    )
    # the week, in the zone chosen: slots start on Tokyo's hours
    await tab.click("a:has-text('Last week')")
    await tab.wait_for_url("**range=week*")
    # the URL is the same before and after the choice: wait for the navigation it makes
    async with tab.expect_navigation():
        await tab.select_option("#tz-choice", "Asia/Tokyo")
    await tab.wait_for_url("**range=week*")
    first = await tab.locator("#trend-table tbody td.time").first.text_content() or ""
    hour_after_mark = mark.replace(minute=0, second=0, microsecond=0) + timedelta(
        hours=1 if mark.minute else 0
    )
    since = (hour_after_mark - timedelta(days=7)).astimezone(ZoneInfo("Asia/Tokyo"))
    assert first == since.strftime("%a %H:%M"), (first, since)
    label = await tab.locator("#chart-throughput svg text.tick").last.text_content() or ""
    assert re.fullmatch(r"[A-Z][a-z]{2} \d\d:00", label), label
