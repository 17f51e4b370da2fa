"""The dashboard's workflow page (GET /workflows/{id}) and its cancel, over HTTP against the real
database: the graph drawn with each step's state and a link to its job, a step's job page linking
back, the count-and-confirm cancel (CSRF, read-only, a count that grew), the log line, the reads
from the read engine, and hostile names escaped (issue 29, point 5)."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from sqlalchemy.engine import make_url

from akadze import Akadze, Job, Workflow
from akadze.testing import drain
from akadze.web import create_app
from tests.conftest import with_database
from tests.support import execute, fetch
from tests.web.conftest import HOSTILE, client_for, token


def build(app: Akadze) -> Akadze:
    @app.task("order.charge", queue="first")
    async def charge(order_id: int) -> int:
        return order_id

    for name in ("ship", "mail", "close", "resize"):

        @app.task(f"order.{name}", queue="after")
        async def step(order_id: int) -> None:
            return None

    @app.task("other.send", queue="other")
    async def send(to: str) -> None:
        return None

    return app


@pytest.fixture
async def wf_app(make_app: Callable[..., Akadze]) -> Akadze:
    return build(make_app())


@pytest.fixture
async def client(wf_app: Akadze) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(create_app(wf_app)) as c:
        yield c


async def diamond(app: Akadze, name: str | None = "order 42", close: str = "close") -> dict[str, Job]:
    task = app.get_task
    wf = Workflow(name=name)
    wf.add("charge", task("order.charge").bind(order_id=42))
    wf.add("ship", task("order.ship").bind(order_id=42), after=["charge"])
    wf.add("mail", task("order.mail").bind(order_id=42), after=["charge"])
    wf.add(close, task("order.close").bind(order_id=42), after=["ship", "mail"])
    return await wf.enqueue()


def links(html: str) -> list[str]:
    return re.findall(r'<a href="(/jobs/\d+)" class="step s-(\w+)"', html)


async def test_the_page_draws_every_step_with_its_state_and_a_link_to_its_job(
    wf_app: Akadze, client: httpx.AsyncClient
) -> None:
    steps = await diamond(wf_app)
    await drain(wf_app, queues=["first"])  # charge succeeds: ship and mail are released
    page = await client.get(f"/workflows/{steps['charge'].workflow_id}")
    assert page.status_code == 200, page.text
    html = page.text
    assert "<h1>Workflow" in html and "order 42" in html
    graph = html[html.index("<svg") : html.index("</svg>")]
    assert sorted(links(graph)) == sorted(
        [
            (f"/jobs/{steps['charge'].id}", "succeeded"),
            (f"/jobs/{steps['ship'].id}", "queued"),
            (f"/jobs/{steps['mail'].id}", "queued"),
            (f"/jobs/{steps['close'].id}", "waiting"),
        ]
    )
    assert graph.count('class="edge') == 4  # charge->ship, charge->mail, ship->close, mail->close
    assert 'class="state state-waiting">waiting</span> 1' in html
    # the table: level by level, each step linking to its job, what each waits for
    table = html[html.index('id="steps"') :]
    assert [int(n) for n in re.findall(r'<a href="/jobs/(\d+)">#', table)] == [
        steps[name].id for name in ("charge", "ship", "mail", "close")
    ]
    assert "ship, mail" in table


async def test_a_steps_job_page_links_to_its_workflow_and_names_what_it_waits_for(
    wf_app: Akadze, client: httpx.AsyncClient
) -> None:
    steps = await diamond(wf_app)
    workflow_id = steps["ship"].workflow_id
    page = (await client.get(f"/jobs/{steps['ship'].id}")).text
    assert f'<a href="/workflows/{workflow_id}" id="job-workflow">workflow {workflow_id}</a>' in page
    assert "step <strong>ship</strong>" in page
    # a waiting step names (and links) the steps it waits for
    assert waited(page) == [(steps["charge"].id, "charge")]
    close = (await client.get(f"/jobs/{steps['close'].id}")).text
    assert waited(close) == [(steps["ship"].id, "ship"), (steps["mail"].id, "mail")]
    assert "job-waits" not in (await client.get(f"/jobs/{steps['charge'].id}")).text
    lone = await wf_app.get_task("other.send").enqueue(to="x")
    assert "/workflows/" not in (await client.get(f"/jobs/{lone.id}")).text


def waited(page: str) -> list[tuple[int, str]]:
    """The steps a job's page says it waits for: (job id, step)."""
    waits = page[page.index('id="job-waits"') :]
    waits = waits[: waits.index("</dd>")]
    return [(int(n), name) for n, name in re.findall(r'<a href="/jobs/(\d+)">(\w+)</a>', waits)]


async def test_a_workflow_whose_steps_were_pruned_says_so(
    wf_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    steps = await diamond(wf_app)
    workflow_id = steps["charge"].workflow_id
    await execute(database_url, f"DELETE FROM akadze_jobs WHERE workflow_id = {workflow_id}")
    page = await client.get(f"/workflows/{workflow_id}")
    assert page.status_code == 200
    assert "No step left" in page.text and "<svg" not in page.text and "Cancel workflow" not in page.text


async def test_a_missing_workflow_or_a_bad_id_is_a_404(client: httpx.AsyncClient) -> None:
    for raw in ("424242", "abc", str(2**70), "0"):
        page = await client.get(f"/workflows/{raw}")
        assert page.status_code == 404 and "No such workflow" in page.text, raw
        assert (await client.get(f"/workflows/{raw}/cancel")).status_code == 404


async def test_cancel_confirms_the_count_then_cancels_every_unfinished_step(
    wf_app: Akadze, client: httpx.AsyncClient, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="akadze.web")
    steps = await diamond(wf_app)
    await drain(wf_app, queues=["first"])
    workflow_id = steps["charge"].workflow_id
    page = (await client.get(f"/workflows/{workflow_id}")).text
    assert f'href="/workflows/{workflow_id}/cancel">Cancel workflow…</a>' in page
    confirm = await client.get(f"/workflows/{workflow_id}/cancel")
    assert confirm.status_code == 200
    assert '<strong id="cancel-count">3</strong> steps of 4' in confirm.text
    assert "1 waiting for their parents, 2 queued, 0 running" in confirm.text
    form = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', confirm.text))
    assert form["count"] == "3"

    # no token: nothing changes
    refused = await client.post(f"/workflows/{workflow_id}/cancel", data={"count": "3"})
    assert refused.status_code == 403
    assert await states(database_url, workflow_id) == ["succeeded", "queued", "queued", "queued"]

    done = await client.post(f"/workflows/{workflow_id}/cancel", data=form)
    assert done.status_code == 303, done.text
    assert done.headers["location"] == f"/workflows/{workflow_id}?done=workflow-cancel&n=3"
    assert await states(database_url, workflow_id) == ["succeeded", "cancelled", "cancelled", "cancelled"]
    after = (await client.get(done.headers["location"])).text
    assert "Cancel took 3 unfinished steps of this workflow" in after
    assert "Cancel workflow…" not in after  # nothing left to cancel
    assert [r.getMessage() for r in caplog.records if "cancel workflow" in r.getMessage()] == [
        f"dashboard: cancel workflow workflow_id={workflow_id} name='order 42' confirmed=3 "
        "unfinished=3 changed=3"
    ]
    again = await client.post(f"/workflows/{workflow_id}/cancel", data=form)
    assert again.status_code == 409 and "has no unfinished step" in again.text
    missing = await client.post("/workflows/424242/cancel", data=form)
    assert missing.status_code == 409 and "no workflow 424242" in missing.text


async def test_cancel_takes_nothing_when_more_steps_are_unfinished_than_confirmed(
    wf_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    steps = await diamond(wf_app)
    workflow_id = steps["charge"].workflow_id
    csrf = await token(client, "/queues")
    # the operator saw 2 unfinished steps; 4 are unfinished now (say a requeue reopened them)
    answer = await client.post(f"/workflows/{workflow_id}/cancel", data={"csrf_token": csrf, "count": "2"})
    assert answer.status_code == 409
    assert "4 steps of workflow" in answer.text and "more than the 2 confirmed" in answer.text
    assert await states(database_url, workflow_id) == ["queued"] * 4
    bad = await client.post(f"/workflows/{workflow_id}/cancel", data={"csrf_token": csrf, "count": "x"})
    assert bad.status_code == 400


async def test_a_read_only_dashboard_offers_no_cancel_and_refuses_it(
    wf_app: Akadze, database_url: str
) -> None:
    steps = await diamond(wf_app)
    workflow_id = steps["charge"].workflow_id
    async with client_for(create_app(wf_app, read_only=True)) as client:
        page = (await client.get(f"/workflows/{workflow_id}")).text
        assert "Cancel workflow" not in page and "csrf_token" not in page
        confirm = (await client.get(f"/workflows/{workflow_id}/cancel")).text
        assert '<form method="post"' not in confirm
        client.cookies.set("akadze_csrf", "t" * 43)
        answer = await client.post(
            f"/workflows/{workflow_id}/cancel", data={"csrf_token": "t" * 43, "count": "4"}
        )
        assert answer.status_code == 403
    assert await states(database_url, workflow_id) == ["queued"] * 4


async def test_the_page_reads_from_the_read_engine(
    wf_app: Akadze, make_app: Callable[..., Akadze], server_url: str, template_db: str, database_url: str
) -> None:
    """An app whose replica lags (here: a database with none of the primary's rows) shows no
    such workflow, while the cancel goes to the primary."""
    steps = await diamond(wf_app)
    workflow_id = steps["charge"].workflow_id
    name = f"{make_url(database_url).database}_replica"
    replica = with_database(database_url, name)
    await execute(server_url, f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    try:
        lagging = build(make_app(read_database_url=replica))
        async with client_for(create_app(lagging)) as client:
            assert (await client.get(f"/workflows/{workflow_id}")).status_code == 404
            csrf = await token(client, "/queues")
            done = await client.post(
                f"/workflows/{workflow_id}/cancel", data={"csrf_token": csrf, "count": "4"}
            )
            assert done.status_code == 303, done.text
        await lagging.dispose()
    finally:
        await execute(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    assert await states(database_url, workflow_id) == ["cancelled"] * 4


async def test_a_wide_level_is_drawn_per_task_and_the_table_lists_the_steps(
    wf_app: Akadze, client: httpx.AsyncClient
) -> None:
    resize = wf_app.get_task("order.resize")
    wf = Workflow(name="album")
    wf.add("start", wf_app.get_task("order.charge").bind(order_id=1))
    for n in range(40):
        wf.add(f"resize-{n}", resize.bind(order_id=n), after=["start"])
    wf.add("album", wf_app.get_task("order.close").bind(order_id=1), after=[f"resize-{n}" for n in range(40)])
    steps = await wf.enqueue()
    html = (await client.get(f"/workflows/{steps['start'].workflow_id}")).text
    graph = html[html.index("<svg") : html.index("</svg>")]
    assert len(links(graph)) == 2  # start and album; the 40 resizes are one box
    assert "40 steps" in graph and "order.resize" in graph and "one box per task" in html
    assert graph.count('class="edge') == 2
    assert len(re.findall(r'<a href="/jobs/\d+">#', html)) == 42


async def test_hostile_names_are_escaped_everywhere(wf_app: Akadze, client: httpx.AsyncClient) -> None:
    steps = await diamond(wf_app, name=HOSTILE, close=HOSTILE)
    workflow_id = steps["charge"].workflow_id
    for path in (
        f"/workflows/{workflow_id}",
        f"/workflows/{workflow_id}/cancel",
        f"/jobs/{steps[HOSTILE].id}",
    ):
        page = await client.get(path)
        assert page.status_code == 200, path
        assert "<script>alert" not in page.text, path
        assert "&lt;script&gt;" in page.text, path


async def states(database_url: str, workflow_id: int | None) -> list[str]:
    rows = await fetch(
        database_url, "SELECT state FROM akadze_jobs WHERE workflow_id = $1 ORDER BY id", workflow_id
    )
    return [row["state"] for row in rows]
