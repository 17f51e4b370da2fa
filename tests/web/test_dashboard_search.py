"""Finding jobs over HTTP against the real database: a job by id from the header, the listing
by time range, error text and argument value (only where arguments may be shown), a text
search's bounded window and how it goes on; jobs ticked in a listing cancelled or requeued;
finished jobs deleted by filter after a count; times in a chosen zone; every listing's live
fragment."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from akadze import Akadze
from akadze.testing import drain
from akadze.web import create_app, listing
from tests.support import execute, fetch, module_database
from tests.web.conftest import client_for


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


def ids(html: str) -> list[int]:
    return [int(i) for i in re.findall(r'<td class="num id"><a href="/jobs/(\d+)">', html)]


def hidden(html: str) -> dict[str, str]:
    return dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', html))


async def test_the_header_goes_to_a_job_by_id_from_any_page(
    akadze_app: Akadze, client: httpx.AsyncClient
) -> None:
    job = await akadze_app.get_task("mail.send").enqueue(to="a")
    for page in ("/", "/jobs", "/queues", "/workers", "/schedules", f"/jobs/{job.id}"):
        assert 'action="/jobs/find"' in (await client.get(page)).text, page
    for typed in (str(job.id), f" #{job.id} "):
        found = await client.get("/jobs/find", params={"id": typed})
        assert found.status_code == 303 and found.headers["location"] == f"/jobs/{job.id}"
    missing = await client.get("/jobs/find", params={"id": "424242"})
    assert missing.status_code == 303  # an id that names no job goes to its page, which says so
    assert (await client.get(missing.headers["location"])).status_code == 404
    for bad in ("abc", "", "-1", "1.5"):
        assert (await client.get("/jobs/find", params={"id": bad})).status_code == 404, bad


async def test_a_time_range_lists_jobs_by_when_they_finished(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    made = await akadze_app.get_task("mail.send").enqueue_many([{"to": str(n)} for n in range(4)])
    queued = await akadze_app.get_task("mail.send").enqueue(to="still queued")
    # finished at 10:00, 11:00, 12:00 and 13:00 UTC, in the reverse of their ids
    for n, job in enumerate(made):
        await execute(
            database_url,
            "UPDATE akadze_jobs SET state = 'succeeded', started_at = finished_at, "
            f"finished_at = '2026-03-01T{13 - n:02d}:00:00Z' WHERE id = {job.id}",
        )
    page = await client.get("/jobs", params={"from": "2026-03-01T10:30:00Z", "to": "2026-03-01T13:00:00Z"})
    assert ids(page.text) == [made[1].id, made[2].id]  # 12:00 then 11:00: newest finished first
    assert queued.id not in ids((await client.get("/jobs", params={"from": "2026-01-01T00:00"})).text)
    # a range without a zone is in the page's zone: 11:30 in Berlin is 10:30 UTC
    client.cookies.set("akadze_tz", "Europe/Berlin")
    local = await client.get("/jobs", params={"from": "2026-03-01T11:30", "to": "2026-03-01T14:00"})
    assert ids(local.text) == [made[1].id, made[2].id]
    assert 'value="2026-03-01T11:30:00"' in local.text
    refused = await client.get("/jobs", params={"state": "queued", "from": "2026-03-01T10:00"})
    assert refused.status_code == 400 and "finished jobs" in refused.text
    assert (await client.get("/jobs", params={"from": "yesterday"})).status_code == 400


async def test_keyset_pages_by_finish_time_walk_every_job_once(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    made = await akadze_app.get_task("mail.send").enqueue_many([{"to": str(n)} for n in range(75)])
    # several jobs share each finish time: the pages break ties by id
    await execute(
        database_url,
        "UPDATE akadze_jobs SET state = 'succeeded', started_at = now(), "
        "finished_at = '2026-03-01T12:00:00Z'::timestamptz + make_interval(mins => CAST(id % 7 AS integer))",
    )
    seen: list[int] = []
    path: str | None = "/jobs?" + str(httpx.QueryParams({"from": "2026-03-01T00:00:00Z"}))
    while path is not None:
        page = (await client.get(path)).text
        seen += ids(page)
        older = re.search(r'rel="next" href="([^"]+)"', page)
        path = older[1].replace("&amp;", "&") if older else None
    assert sorted(seen) == sorted(job.id for job in made) and len(seen) == len(set(seen))
    minutes = await fetch(database_url, "SELECT id, finished_at FROM akadze_jobs")
    order = {row["id"]: (row["finished_at"], row["id"]) for row in minutes}
    assert seen == sorted(seen, key=lambda i: order[i], reverse=True)


async def test_error_text_and_argument_values_find_their_jobs(
    akadze_app: Akadze, client: httpx.AsyncClient
) -> None:
    failed = await akadze_app.get_task("report.build").enqueue_many([{"n": n} for n in (7, 8)])
    await drain(akadze_app, queues=["reports"])
    mail = await akadze_app.get_task("mail.send").enqueue_many([{"to": "ann", "body": "hi"}, {"to": "bob"}])
    by_error = await client.get("/jobs", params={"error": "REPORT 7 FAILED"})
    assert ids(by_error.text) == [failed[0].id]
    assert "Searched 4 jobs" in by_error.text
    assert ids((await client.get("/jobs", params={"error": "RuntimeError"})).text) == [
        failed[1].id,
        failed[0].id,
    ]
    assert ids((await client.get("/jobs", params={"arg": "to=bob"})).text) == [mail[1].id]
    assert ids((await client.get("/jobs", params={"arg": "n=8"})).text) == [failed[1].id]
    assert ids((await client.get("/jobs", params={"arg": "ann"})).text) == [mail[0].id]
    assert ids((await client.get("/jobs", params={"arg": "to=an"})).text) == []
    both = await client.get("/jobs", params={"arg": "n=7", "error": "failed", "task": "report.build"})
    assert ids(both.text) == [failed[0].id]


async def test_arguments_are_not_searched_where_they_are_not_shown(akadze_app: Akadze) -> None:
    await akadze_app.get_task("mail.send").enqueue(to="secret-person")
    async with client_for(create_app(akadze_app, show_args=False)) as client:
        listing_page = (await client.get("/jobs")).text
        assert 'name="arg"' not in listing_page
        refused = await client.get("/jobs", params={"arg": "to=secret-person"})
        assert refused.status_code == 400 and "does not search them" in refused.text
        bulk = await client.get("/jobs/bulk", params={"action": "cancel", "arg": "secret-person"})
        assert bulk.status_code == 400


async def test_a_text_search_reads_a_bounded_window_and_goes_on_from_it(
    akadze_app: Akadze, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(listing, "SEARCH_WINDOW", 10)
    made = await akadze_app.get_task("mail.send").enqueue_many([{"to": f"u{n}"} for n in range(27)])
    found: list[int] = []
    searched: list[int] = []
    path: str | None = "/jobs?" + str(httpx.QueryParams({"arg": "to=u2"}))
    while path is not None:
        page = (await client.get(path)).text
        said = re.search(r"Searched (\d+) jobs?", page)
        assert said is not None, page
        searched.append(int(said[1]))
        found += ids(page)
        older = re.search(r'rel="next" href="([^"]+)"', page)
        path = older[1].replace("&amp;", "&") if older else None
    # 27 jobs, 10 a window: the newest ten, the next ten, the last seven (u2 among them)
    assert searched == [10, 10, 7] and found == [made[2].id]


async def test_ticked_jobs_are_cancelled_and_requeued_after_a_count(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    queued = await akadze_app.get_task("mail.send").enqueue_many([{"to": str(n)} for n in range(4)])
    failed = await akadze_app.get_task("report.build").enqueue_many([{"n": n} for n in range(3)])
    await drain(akadze_app, queues=["reports"])
    listing_page = (await client.get("/jobs")).text
    assert 'form="selection"' in listing_page and 'id="selection"' in listing_page
    picked = [queued[0].id, queued[2].id, failed[1].id]  # the failed one cannot be cancelled
    confirm = await client.get("/jobs/bulk", params=[("action", "cancel"), *[("id", str(i)) for i in picked]])
    assert '<strong id="bulk-count">2</strong>' in confirm.text
    done = await client.post("/jobs/bulk", data=hidden(confirm.text))
    assert "n=2&of=2" in done.headers["location"]
    states = dict(await fetch(database_url, "SELECT id, state FROM akadze_jobs"))
    assert [states[job.id] for job in queued] == ["cancelled", "queued", "cancelled", "queued"]
    assert states[failed[1].id] == "failed"
    again = await client.get("/jobs/bulk", params=[("action", "requeue"), ("id", str(failed[1].id))])
    assert '<strong id="bulk-count">1</strong>' in again.text
    await client.post("/jobs/bulk", data=hidden(again.text))
    states = dict(await fetch(database_url, "SELECT id, state FROM akadze_jobs"))
    assert [states[job.id] for job in failed] == ["failed", "queued", "failed"]
    bad = await client.get("/jobs/bulk", params={"action": "cancel", "id": "x1"})
    assert bad.status_code == 400


async def test_finished_jobs_are_deleted_by_filter_after_a_count(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    failed = await akadze_app.get_task("report.build").enqueue_many([{"n": n} for n in range(3)])
    await drain(akadze_app, queues=["reports"])
    queued = await akadze_app.get_task("report.build").enqueue(n=99)
    confirm = await client.get("/jobs/bulk", params={"action": "delete", "task": "report.build"})
    assert '<strong id="bulk-count">3</strong>' in confirm.text  # the queued one is not finished
    form = hidden(confirm.text)
    late = await akadze_app.get_task("report.build").enqueue(n=100)
    await drain(akadze_app, queues=["reports"])  # finishes after the count: not taken
    done = await client.post("/jobs/bulk", data=form)
    assert "done=bulk-delete" in done.headers["location"] and "n=3&of=3" in done.headers["location"]
    left = {row["id"] for row in await fetch(database_url, "SELECT id FROM akadze_jobs")}
    assert left == {late.id, queued.id} and not left & {job.id for job in failed}
    assert "Deleted 3 of 3 selected jobs" in (await client.get(done.headers["location"])).text
    nothing = await client.get("/jobs/bulk", params={"action": "delete", "state": "queued"})
    assert '<strong id="bulk-count">0</strong>' in nothing.text


async def test_bulk_by_error_text_takes_only_what_matches(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    failed = await akadze_app.get_task("report.build").enqueue_many([{"n": n} for n in (1, 2, 3)])
    await drain(akadze_app, queues=["reports"])
    confirm = await client.get("/jobs/bulk", params={"action": "requeue", "error": "report 2 failed"})
    assert '<strong id="bulk-count">1</strong>' in confirm.text
    await client.post("/jobs/bulk", data=hidden(confirm.text))
    states = dict(await fetch(database_url, "SELECT id, state FROM akadze_jobs"))
    assert [states[job.id] for job in failed] == ["failed", "queued", "failed"]


async def test_times_show_in_the_chosen_zone_and_utc_by_default(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    job = await akadze_app.get_task("mail.send").enqueue(to="a")
    await execute(
        database_url, f"UPDATE akadze_jobs SET created_at = '2026-07-01T12:00:00Z' WHERE id = {job.id}"
    )
    page = (await client.get(f"/jobs/{job.id}")).text
    assert '<time datetime="2026-07-01T12:00:00Z">2026-07-01 12:00:00Z</time>' in page
    chosen = await client.get(
        "/timezone", params={"tz": "Asia/Tokyo"}, headers={"referer": f"http://dash.test/jobs/{job.id}"}
    )
    assert chosen.status_code == 303 and chosen.headers["location"] == f"/jobs/{job.id}"
    page = (await client.get(f"/jobs/{job.id}")).text
    assert '<time datetime="2026-07-01T12:00:00Z">2026-07-01 21:00:00 JST</time>' in page
    assert '<option value="Asia/Tokyo" selected>' in page
    assert (await client.get("/timezone", params={"tz": "Mars/Olympus"})).status_code == 400
    # never back to another site
    away = await client.get("/timezone", params={"tz": "UTC", "back": "//evil.example/x"})
    assert away.headers["location"] == "/"
    away = await client.get(
        "/timezone", params={"tz": "UTC"}, headers={"referer": "http://evil.example/jobs"}
    )
    assert away.headers["location"] == "/"
    chooser = await client.get("/timezone")
    assert chooser.status_code == 200 and '<option value="Europe/Berlin">' in chooser.text


async def test_recent_times_say_how_long_ago(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    job = await akadze_app.get_task("mail.send").enqueue(to="a")
    await execute(
        database_url, f"UPDATE akadze_jobs SET created_at = now() - interval '3 minutes' WHERE id = {job.id}"
    )
    page = (await client.get("/jobs")).text
    assert re.search(r'</time> <span class="rel">3 min ago</span>', page), page


@pytest.mark.parametrize("path", ["/", "/jobs", "/queues", "/workers", "/schedules"])
async def test_every_listing_page_has_a_live_part_that_refreshes_alone(
    client: httpx.AsyncClient, path: str
) -> None:
    page = (await client.get(path)).text
    live = re.search(r'<section id="live" class="live" data-refresh="([^"]+)" data-every="(\d+)">', page)
    assert live is not None, path
    assert "aria-live" not in page  # a refresh is not read out again by screen readers
    fragment = await client.get(live[1].replace("&amp;", "&"))
    assert fragment.status_code == 200
    assert "<html" not in fragment.text and "<table" in fragment.text, path


async def test_an_old_time_is_shown_without_how_long_ago(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    job = await akadze_app.get_task("mail.send").enqueue(to="a")
    old = datetime.now(UTC) - timedelta(days=3)
    await execute(
        database_url, f"UPDATE akadze_jobs SET created_at = '{old.isoformat()}' WHERE id = {job.id}"
    )
    page = (await client.get("/jobs")).text
    created = re.search(
        r'<td class="time">(<time datetime="[^"]+">[^<]+</time>[^<]*(?:<span[^>]*>[^<]*</span>)?)</td>', page
    )
    assert created is not None and old.strftime("%Y-%m-%d") in created[1]
    assert '<span class="rel">' not in created[1]
