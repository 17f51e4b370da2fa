"""Every page of the dashboard over HTTP against the real database: what it shows, keyset
pagination, arguments only on request (never with show_args=False), links under a mount
prefix, and every name, message and argument a job or user controls escaped."""

from __future__ import annotations

import re
from collections.abc import Callable

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from akadze import Akadze
from akadze.testing import drain
from akadze.web import create_app
from akadze.worker import Worker
from tests.conftest import wait_until
from tests.support import execute, fetchval, module_database
from tests.web.conftest import HOSTILE, build_app, client_for

PAGES = ["/", "/?fragment=live", "/jobs", "/queues", "/schedules", "/workers", "/jobs/bulk?action=cancel"]


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


@pytest.mark.parametrize("path", PAGES)
async def test_every_page_answers_with_html(client: httpx.AsyncClient, path: str) -> None:
    page = await client.get(path)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert "<h1>" in page.text or "<table" in page.text


async def test_the_overview_counts_ready_delayed_running_and_recent_failures(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    from datetime import timedelta

    send = akadze_app.get_task("mail.send")
    for n in range(3):
        await send.enqueue(to=f"u{n}")
    await send.using(delay=timedelta(hours=1)).enqueue(to="later")
    await akadze_app.get_task("report.build").enqueue(n=1)
    await drain(akadze_app, queues=["reports"])
    page = (await client.get("/?fragment=live")).text
    row = re.search(r"<tr>\s*<td class=\"name\"><a href=\"/jobs\?queue=mail\">mail</a>.*?</tr>", page, re.S)
    assert row is not None, page
    cells = re.findall(r'<td class="num[^"]*">(?:<a [^>]*>)?([^<]*)', row[0])
    # ready, delayed, running, failed (1 h), oldest ready, workers
    assert cells[:4] == ["3", "1", "0", "0"]
    reports = re.search(
        r"<tr>\s*<td class=\"name\"><a href=\"/jobs\?queue=reports\">reports</a>.*?</tr>", page, re.S
    )
    assert reports is not None
    assert re.findall(r'<td class="num[^"]*">(?:<a [^>]*>)?([^<]*)', reports[0])[3] == "1"
    assert "1 in 5 min" in reports[0]


async def test_the_jobs_page_filters_by_state_task_and_queue(
    akadze_app: Akadze, client: httpx.AsyncClient
) -> None:
    mail = await akadze_app.get_task("mail.send").enqueue(to="a")
    report = await akadze_app.get_task("report.build").enqueue(n=2)
    await drain(akadze_app, queues=["reports"])

    def ids(html: str) -> set[int]:
        return {int(i) for i in re.findall(r'<td class="num id"><a href="/jobs/(\d+)">', html)}

    assert ids((await client.get("/jobs")).text) == {mail.id, report.id}
    assert ids((await client.get("/jobs", params={"state": "failed"})).text) == {report.id}
    assert ids((await client.get("/jobs", params={"task": "mail.send"})).text) == {mail.id}
    assert ids((await client.get("/jobs", params={"queue": "reports"})).text) == {report.id}
    assert ids((await client.get("/jobs", params={"queue": "reports", "state": "queued"})).text) == set()
    bad = await client.get("/jobs", params={"state": "nope"})
    assert bad.status_code == 400
    assert "state must be one of" in bad.text
    assert (await client.get("/jobs", params={"before": "-1"})).status_code == 400


async def test_keyset_pages_walk_every_job_newest_first_without_overlap(
    akadze_app: Akadze, client: httpx.AsyncClient
) -> None:
    made = await akadze_app.get_task("mail.send").enqueue_many([{"to": str(n)} for n in range(120)])
    seen: list[int] = []
    path: str | None = "/jobs"
    while path is not None:
        page = (await client.get(path)).text
        seen += [int(i) for i in re.findall(r'<td class="num id"><a href="/jobs/(\d+)">', page)]
        older = re.search(r'rel="next" href="([^"]+)"', page)
        path = older[1].replace("&amp;", "&") if older else None
    assert seen == sorted((job.id for job in made), reverse=True)
    assert len(seen) == 120


async def test_one_job_shows_state_attempts_errors_and_a_timeline(
    akadze_app: Akadze, client: httpx.AsyncClient
) -> None:
    job = await akadze_app.get_task("report.build").enqueue(n=7)
    await drain(akadze_app, queues=["reports"])
    page = (await client.get(f"/jobs/{job.id}")).text
    assert "state-failed" in page
    assert "1 of 1" in page
    assert "<td>RuntimeError</td>" in page
    assert "report 7 failed" in page
    timeline = re.search(r'<ol class="timeline">(.*?)</ol>', page, re.S)
    assert timeline is not None
    steps = re.findall(r"<strong>([^<]+)</strong>", timeline[1])
    assert steps[0] == "enqueued" and steps[-1] == "failed" and "attempt 1 started" in steps
    assert (await client.get("/jobs/999999")).status_code == 404


async def test_arguments_show_only_on_request(akadze_app: Akadze, client: httpx.AsyncClient) -> None:
    job = await akadze_app.get_task("mail.send").enqueue(to="x", body="secret-body-1234")
    assert "secret-body-1234" not in (await client.get(f"/jobs/{job.id}")).text
    shown = (await client.get(f"/jobs/{job.id}", params={"show": "args"})).text
    assert "secret-body-1234" in shown


async def test_show_args_false_never_shows_arguments_or_results(akadze_app: Akadze) -> None:
    job = await akadze_app.get_task("mail.send").enqueue(to="x", body="secret-body-1234")
    async with client_for(create_app(akadze_app, show_args=False)) as client:
        for path in (f"/jobs/{job.id}", f"/jobs/{job.id}?show=args", "/jobs", "/"):
            page = (await client.get(path)).text
            assert "secret-body-1234" not in page
            assert "show=args" not in page


async def test_the_queues_page_lists_declared_paused_and_used_queues(
    akadze_app: Akadze, client: httpx.AsyncClient
) -> None:
    await akadze_app.pause_queue("not-yet-used")
    page = (await client.get("/queues")).text
    for name in ("mail", "reports", "not-yet-used"):
        assert f'id="queue-{name}"' in page
    row = re.search(r'id="queue-not-yet-used">.*?</tr>', page, re.S)
    assert row is not None and "state-paused" in row[0] and "/queues/not-yet-used/resume" in row[0]


async def test_the_schedules_page_shows_next_fire_times_and_last_runs(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    job = await akadze_app.get_task("report.build").enqueue(n=1)
    await execute(
        database_url,
        "INSERT INTO akadze_schedule_runs (schedule, fire_at, job_id) "
        f"VALUES ('nightly', '2026-01-02T03:00:00Z', {job.id})",
    )
    page = (await client.get("/schedules")).text
    nightly = re.search(r"<td class=\"name\">nightly</td>.*?</tr>", page, re.S)
    assert nightly is not None
    ahead = nightly[0].split("</ul>")[0]  # the first list: the next fire times
    upcoming = re.findall(r"<li><time datetime=\"[^\"]+\">(\d{4}-\d\d-\d\d 03:00:00Z)</time>", ahead)
    assert len(upcoming) == 3
    assert "2026-01-02 03:00:00Z" in nightly[0] and f"/jobs/{job.id}" in nightly[0]


async def test_the_workers_page_shows_heartbeat_slots_and_running_jobs(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    import asyncio

    started = asyncio.Event()
    release = asyncio.Event()

    @akadze_app.task("slow", queue="slow")
    async def slow() -> None:
        started.set()
        await release.wait()

    job = await slow.enqueue()
    worker = Worker(akadze_app, queues=["slow"], slots=3, name=f"w-{HOSTILE}")
    serving = asyncio.create_task(worker.run(handle_signals=False))
    try:
        await asyncio.wait_for(started.wait(), 10)
        page = (await client.get("/workers")).text
        assert "1 / 3" in page
        assert f'href="/jobs/{job.id}"' in page
        assert "&lt;script&gt;" in page and "<script>alert" not in page
    finally:
        release.set()
        worker.stop()
        await asyncio.wait_for(serving, 10)
    await wait_until(lambda: fetchval(database_url, "SELECT count(*) = 0 FROM akadze_workers"))
    assert "No live worker" in (await client.get("/workers")).text


async def test_every_string_jobs_or_users_control_is_escaped(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    hostile = akadze_app.get_task(f"hostile.{HOSTILE}")
    job = await hostile.enqueue(note=HOSTILE)
    failed = await akadze_app.get_task("report.build").enqueue(n=3)
    await drain(akadze_app, queues=["reports"])
    await akadze_app.pause_queue(HOSTILE)
    await execute(
        database_url,
        "INSERT INTO akadze_schedule_runs (schedule, fire_at, job_id) "
        f"VALUES ('every-{HOSTILE.replace(chr(39), chr(39) * 2)}', now(), {job.id})",
    )
    paths = [
        *PAGES,
        f"/jobs/{job.id}",
        f"/jobs/{job.id}?show=args",
        f"/jobs/{failed.id}",
        "/jobs?" + httpx.QueryParams({"task": f"hostile.{HOSTILE}", "queue": f"q-{HOSTILE}"}).__str__(),
        "/jobs/bulk?" + httpx.QueryParams({"action": "cancel", "queue": HOSTILE}).__str__(),
    ]
    for path in paths:
        page = await client.get(path)
        assert page.status_code == 200, path
        # the only script elements are the dashboard's own
        own = ['<script src="/static/dashboard.js" defer>']
        assert re.findall(r"<script[^>]*>", page.text) in ([], own), path
        assert "<script>alert" not in page.text, path
        assert '</script>"' not in page.text and "\"'&" not in page.text, path
    for path, expected in [
        ("/jobs", "hostile.&lt;script&gt;"),
        (f"/jobs/{failed.id}", "failed: &lt;script&gt;"),
        (f"/jobs/{job.id}?show=args", "&lt;script&gt;"),
        ("/schedules", "every-&lt;script&gt;"),
        ("/queues", "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&#34;&#39;&amp;"),
    ]:
        assert expected in (await client.get(path)).text, path


async def test_links_forms_and_redirects_keep_the_mount_prefix(make_app: Callable[..., Akadze]) -> None:
    akadze_app = build_app(make_app)
    job = await akadze_app.get_task("mail.send").enqueue(to="a")
    outer = Starlette(routes=[Mount("/ops/akadze", app=create_app(akadze_app))])
    async with client_for(outer) as client:
        page = await client.get(f"/ops/akadze/jobs/{job.id}")
        assert page.status_code == 200
        hrefs = re.findall(r'(?:href|action|src)="([^"]+)"', page.text)
        assert hrefs and all(h.startswith("/ops/akadze/") or h.startswith("#") for h in hrefs), hrefs
        assert page.cookies.get("akadze_csrf") or client.cookies.get("akadze_csrf")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text)
        assert token is not None
        done = await client.post(f"/ops/akadze/jobs/{job.id}/cancel", data={"csrf_token": token[1]})
        assert done.status_code == 303
        assert done.headers["location"] == f"/ops/akadze/jobs/{job.id}?done=cancel"
        assert (await client.get("/ops/akadze/static/dashboard.js")).status_code == 200


def test_the_worker_and_the_cli_never_import_the_web_libraries() -> None:
    import subprocess
    import sys

    from tests.support import ROOT

    probe = (
        "import sys, akadze, akadze.worker, akadze.cli, akadze.web; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'starlette', 'jinja2', 'uvicorn', 'httpx'}))"
    )
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


async def test_unusable_filters_and_ids_get_a_clear_answer_not_an_error(client: httpx.AsyncClient) -> None:
    nul = await client.get("/jobs", params={"task": "a\x00b"})
    assert nul.status_code == 400 and "NUL" in nul.text
    long = await client.get("/jobs", params={"queue": "q" * 5000})
    assert long.status_code == 400 and "limit" in long.text
    assert (await client.get(f"/jobs/{2**70}")).status_code == 404
    assert (await client.get("/jobs/bulk", params={"action": "destroy"})).status_code == 400
