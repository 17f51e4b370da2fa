"""The workflow page in a real headless Chromium (Debian's chromium, driven by Playwright): the
graph drawn with every step's state (photographed into docs/dashboard/ with AKADZE_SCREENSHOTS),
a click on a step to its job and back through the job's link to its workflow, the cancel confirmed
and checked in the database, and the page at a phone's width (issue 29, point 5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from akadze import Akadze, Job, Workflow
from akadze.testing import drain
from tests.support import fetch
from tests.web.browser import CHROMIUM, REQUIRED, Tabs, served, shots, tabs

__all__ = ["served", "tabs"]  # fixtures
pytestmark = [
    pytest.mark.skipif(
        CHROMIUM is None and not REQUIRED, reason="no chromium on PATH (apt-get install chromium)"
    ),
    pytest.mark.timeout(240),
]


async def order(app: Akadze) -> dict[str, Job]:
    """A report, then two mails; a check that fails, and the notice after it (cancelled by it);
    a close that runs once all of them have finished, whatever their end."""
    build, send = app.get_task("reports.build"), app.get_task("mail.send")
    wf = Workflow(name="order 42")
    wf.add("report", build.bind(month="2026-11"))
    wf.add("check", build.bind(month="2026-13"))
    wf.add("mail-customer", send.bind(to="customer@example.test"), after=["report"])
    wf.add("mail-warehouse", send.bind(to="warehouse@example.test"), after=["report"])
    wf.add("notify", send.bind(to="ops@example.test"), after=["check"])
    wf.add(
        "close",
        send.bind(to="books@example.test"),
        after=["mail-customer", "mail-warehouse", "notify"],
        after_failure="run",
    )
    steps = await wf.enqueue()
    await drain(app, queues=["reports"])  # report succeeds, check fails: notify is cancelled
    return steps


async def states(db: str, workflow_id: int | None) -> dict[str, str]:
    rows = await fetch(db, "SELECT step, state FROM akadze_jobs WHERE workflow_id = $1", workflow_id)
    return {row["step"]: row["state"] for row in rows}


async def test_the_graph_links_each_step_and_a_click_cancels_the_workflow(
    served: dict[str, Any], tabs: Tabs, tmp_path: Path
) -> None:
    url, db, folder = served["url"], served["db"], shots(tmp_path)
    steps = await order(served["app"])
    workflow_id = steps["report"].workflow_id
    assert await states(db, workflow_id) == {
        "report": "succeeded",
        "check": "failed",
        "mail-customer": "queued",
        "mail-warehouse": "queued",
        "notify": "cancelled",
        "close": "queued",
    }
    page = await tabs.open()
    response = await page.goto(f"{url}/workflows/{workflow_id}")
    assert response is not None and response.status == 200
    assert f"Workflow {workflow_id}" in await page.inner_text("h1")
    # every step is drawn as a link to its job, coloured by its state by the stylesheet
    drawn = await page.eval_on_selector_all(
        "svg.workflow a",
        """links => links.map(a => [a.getAttribute('href'), a.getAttribute('class'),
            getComputedStyle(a.querySelector('rect')).fill])""",
    )
    assert sorted((href, kind) for href, kind, _ in drawn) == sorted(
        (f"/ops/jobs/{steps[name].id}", f"step s-{state}")
        for name, state in (
            ("report", "succeeded"),
            ("check", "failed"),
            ("mail-customer", "queued"),
            ("mail-warehouse", "queued"),
            ("notify", "cancelled"),
            ("close", "waiting"),
        )
    )
    fills = {kind: fill for _, kind, fill in drawn}
    assert len(set(fills.values())) >= 4, fills  # the states are told apart by colour
    assert await page.eval_on_selector_all("svg.workflow path.edge", "e => e.length") == 6
    await page.screenshot(path=str(folder / "workflow.png"), full_page=True)

    # a step's node goes to its job, whose page links back to the workflow
    await page.click(f"svg.workflow a[href='/ops/jobs/{steps['notify'].id}']")
    await page.wait_for_url(f"**/ops/jobs/{steps['notify'].id}")
    assert "DependencyFailed" in await page.inner_text("table.errors")
    await page.click("#job-workflow")
    await page.wait_for_url(f"**/ops/workflows/{workflow_id}")

    # cancel: the confirmation counts the unfinished steps, the click cancels them
    await page.click("a:has-text('Cancel workflow…')")
    await page.wait_for_url(f"**/ops/workflows/{workflow_id}/cancel")
    assert await page.inner_text("#cancel-count") == "3"
    await page.click("button:has-text('Cancel 3 steps')")
    await page.wait_for_url(f"**/ops/workflows/{workflow_id}?done=workflow-cancel&n=3")
    assert "Cancel took 3 unfinished steps" in await page.inner_text(".notice")
    assert await states(db, workflow_id) == {
        "report": "succeeded",
        "check": "failed",
        "mail-customer": "cancelled",
        "mail-warehouse": "cancelled",
        "notify": "cancelled",
        "close": "cancelled",
    }


async def test_at_a_phones_width_the_graph_scrolls_in_its_own_box(served: dict[str, Any], tabs: Tabs) -> None:
    steps = await order(served["app"])
    phone = await tabs.open(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    await phone.goto(f"{served['url']}/workflows/{steps['report'].workflow_id}")
    laid = await phone.evaluate(
        """() => ({
            inner: window.innerWidth,
            page: document.documentElement.scrollWidth,
            box: document.querySelector('#graph').scrollWidth,
            shown: document.querySelector('#graph').clientWidth,
        })"""
    )
    assert laid["page"] == laid["inner"] == 390, laid  # the page itself does not scroll sideways
    assert laid["box"] > laid["shown"], laid  # the graph does, in its box
