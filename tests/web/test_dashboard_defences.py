"""The gaps of issue 34 in the dashboard's defences, each over HTTP against the real database:
ids too long for int(), queues named like dot segments, what a cancel of a running job says,
the CSRF token signed and the Origin checked, the log lines naming what changed, a bulk requeue
saying why it skipped, the Secure cookie, nosniff, tokens of any length, and auth answers that
are not True."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from datetime import timedelta
from urllib.parse import urljoin

import httpx
import pytest
from starlette.requests import Request

from akadze import Akadze, Unique
from akadze.testing import drain
from akadze.web import create_app
from tests.support import execute, fetch, fetchval, module_database
from tests.web.conftest import build_app, client_for, token


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


def forms(page: str) -> list[tuple[str, dict[str, str]]]:
    """Each POST form of a page: its action and its hidden fields."""
    found = []
    for action, body in re.findall(r'<form method="post" action="([^"]+)"[^>]*>(.*?)</form>', page, re.S):
        found.append(
            (action, dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', body)))
        )
    return found


async def test_a_job_id_of_any_length_is_a_404_or_a_409_never_a_500(client: httpx.AsyncClient) -> None:
    csrf = await token(client)
    for digits in (19, 20, 4300, 4301, 10_000):
        raw = "9" * digits
        assert (await client.get(f"/jobs/{raw}")).status_code == 404, digits
        for action in ("cancel", "requeue", "run-now"):
            response = await client.post(f"/jobs/{raw}/{action}", data={"csrf_token": csrf})
            assert response.status_code == 409 and "there is no job" in response.text, (digits, action)
    assert (await client.get("/jobs/find", params={"id": "9" * 5000})).status_code == 404


@pytest.mark.parametrize("name", ["..", "."])
async def test_a_queue_named_like_a_dot_segment_pauses_and_resumes_from_its_form(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str, name: str
) -> None:
    await akadze_app.get_task("mail.send").using(queue=name).enqueue(to="a")

    async def press(label: str) -> httpx.Response:
        page = (await client.get("/queues")).text
        row = re.search(rf'<tr id="queue-{re.escape(name)}">.*?</tr>', page, re.S)
        assert row is not None, page
        [(action, fields)] = forms(row[0])
        # where a browser posts the form: dot segments resolved (RFC 3986, as the URL standard)
        target = urljoin("http://dash.test/queues", action)
        response = await client.post(target, data=fields)
        assert response.status_code == 303, (label, target, response.text)
        return response

    await press("pause")
    assert await fetch(database_url, "SELECT queue FROM akadze_queue_pauses") == [(name,)]
    await press("resume")
    assert await fetch(database_url, "SELECT queue FROM akadze_queue_pauses") == []


async def test_cancelling_a_running_job_says_what_will_happen(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    job = await akadze_app.get_task("mail.send").enqueue(to="a")
    # a running job, as a worker's claim leaves it (the run itself plays no part here)
    await execute(
        database_url,
        "UPDATE akadze_jobs SET state = 'running', attempt = 1, run = 1, started_at = now() "
        f"WHERE id = {job.id}",
    )
    csrf = await token(client, f"/jobs/{job.id}")
    done = await client.post(f"/jobs/{job.id}/cancel", data={"csrf_token": csrf})
    assert done.status_code == 303
    notice = re.search(
        r'<p class="notice" role="status">(.*?)</p>', (await client.get(done.headers["location"])).text
    )
    assert notice is not None
    assert "If its run returns normally the job ends succeeded" in notice[1]
    assert "if it raises, it ends cancelled" in notice[1]
    assert await fetchval(database_url, f"SELECT cancel_requested FROM akadze_jobs WHERE id = {job.id}")


async def _queue_paused(database_url: str) -> bool:
    return bool(await fetch(database_url, "SELECT 1 FROM akadze_queue_pauses"))


async def test_an_origin_of_another_site_is_refused_even_with_a_valid_token(
    client: httpx.AsyncClient, database_url: str
) -> None:
    csrf = await token(client)
    for origin in ("http://evil.example", "null", "http://dash.test.evil.example", "http://dash.test:8001"):
        refused = await client.post(
            "/queues/mail/pause", data={"csrf_token": csrf}, headers={"origin": origin}
        )
        assert refused.status_code == 403, origin
        assert not await _queue_paused(database_url)
    # the dashboard's own origin, and a proxy that ends TLS (https in Origin, the host in Host)
    for origin in ("http://dash.test", "https://dash.test"):
        ok = await client.post("/queues/mail/pause", data={"csrf_token": csrf}, headers={"origin": origin})
        assert ok.status_code == 303, origin
        await execute(database_url, "DELETE FROM akadze_queue_pauses")
    forwarded = await client.post(
        "/queues/mail/pause",
        data={"csrf_token": csrf},
        headers={"origin": "https://ops.example", "x-forwarded-host": "ops.example"},
    )
    assert forwarded.status_code == 303


async def test_sec_fetch_site_none_and_a_missing_header_pass_as_the_docs_say(
    client: httpx.AsyncClient, database_url: str
) -> None:
    csrf = await token(client)
    for headers in ({"sec-fetch-site": "none"}, {}, {"sec-fetch-site": "same-origin"}):
        done = await client.post("/queues/mail/pause", data={"csrf_token": csrf}, headers=headers)
        assert done.status_code == 303, headers
        await execute(database_url, "DELETE FROM akadze_queue_pauses")
    for site in ("cross-site", "same-site"):
        refused = await client.post(
            "/queues/mail/pause", data={"csrf_token": csrf}, headers={"sec-fetch-site": site}
        )
        assert refused.status_code == 403
    assert not await _queue_paused(database_url)


async def test_a_token_the_dashboard_did_not_sign_is_refused_whatever_its_length(
    client: httpx.AsyncClient, database_url: str
) -> None:
    issued = await token(client)
    planted = [
        "abc",  # any length that matches its cookie
        "x" * 43,
        "A" * 43 + "." + "B" * 43,  # the issuer's shape, signed by nobody
        issued + "A",
    ]
    if "." in issued:  # a real nonce with a forged signature
        planted.append(issued.split(".")[0] + "." + "A" * 43)
    for value in planted:
        client.cookies.set("akadze_csrf", value)
        response = await client.post("/queues/mail/pause", data={"csrf_token": value})
        assert response.status_code == 403, value
    assert not await _queue_paused(database_url)
    client.cookies.set("akadze_csrf", issued)
    assert (await client.post("/queues/mail/pause", data={"csrf_token": issued})).status_code == 303


async def test_every_process_of_one_database_accepts_the_others_tokens(
    akadze_app: Akadze, database_url: str
) -> None:
    async with client_for(create_app(akadze_app)) as first, client_for(create_app(akadze_app)) as second:
        csrf = await token(first)
        second.cookies.set("akadze_csrf", csrf)
        done = await second.post("/queues/mail/pause", data={"csrf_token": csrf})
        assert done.status_code == 303
    assert await _queue_paused(database_url)


async def test_the_key_is_made_again_when_its_row_is_gone(akadze_app: Akadze, database_url: str) -> None:
    await execute(database_url, "DELETE FROM akadze_web_secret")
    async with client_for(create_app(akadze_app)) as client:
        csrf = await token(client)
        assert (await client.post("/queues/mail/pause", data={"csrf_token": csrf})).status_code == 303
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_web_secret") == 1


async def test_the_csrf_cookie_is_secure_on_https_only(akadze_app: Akadze) -> None:
    async with client_for(create_app(akadze_app), "https://dash.test") as secure:
        cookie = (await secure.get("/queues")).headers["set-cookie"]
        assert (
            "secure" in cookie.lower()
            and "httponly" in cookie.lower()
            and "samesite=strict" in cookie.lower()
        )
    async with client_for(create_app(akadze_app)) as plain_http:
        assert "secure" not in (await plain_http.get("/queues")).headers["set-cookie"].lower()


async def test_every_response_says_nosniff(akadze_app: Akadze, client: httpx.AsyncClient) -> None:
    for path in ("/", "/jobs", "/static/dashboard.css", "/static/dashboard.js", "/jobs/999", "/nowhere"):
        response = await client.get(path)
        assert response.headers.get("x-content-type-options") == "nosniff", path
        assert response.headers.get("x-frame-options") == "DENY", path
    refused = await client.post("/queues/mail/pause", data={})
    assert refused.headers.get("x-content-type-options") == "nosniff"
    async with client_for(create_app(akadze_app, auth=lambda request: False)) as closed:
        response = await closed.get("/")
        assert response.status_code == 403 and response.headers.get("x-content-type-options") == "nosniff"


@pytest.mark.parametrize("answer", ["no", 1, [False], object(), None])
async def test_only_true_from_auth_lets_a_request_through(
    akadze_app: Akadze, answer: object, caplog: pytest.LogCaptureFixture
) -> None:
    def auth(request: Request) -> bool:
        return answer  # type: ignore[return-value]  # the wrong answer is the point

    async def async_auth(request: Request) -> bool:
        return answer  # type: ignore[return-value]  # the wrong answer is the point

    for chosen in (auth, async_auth):
        async with client_for(create_app(akadze_app, auth=chosen)) as client:
            assert (await client.get("/")).status_code == 403
            assert (await client.get("/static/dashboard.css")).status_code == 403
    assert "not True or False" in caplog.text


async def test_action_log_lines_name_the_job_or_queue_and_what_changed(
    akadze_app: Akadze, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="akadze.web")
    csrf = await token(client)
    await client.post("/queues/mail/pause", data={"csrf_token": csrf})
    await client.post("/queues/mail/resume", data={"csrf_token": csrf})
    jobs = await akadze_app.get_task("mail.send").enqueue_many([{"to": "a"}, {"to": "b"}])
    confirm = await client.get("/jobs/bulk", params={"action": "cancel", "queue": "mail"})
    form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', confirm.text))
    await client.post("/jobs/bulk", data=form)
    lines = [r.getMessage() for r in caplog.records if r.name == "akadze.web"]
    assert "dashboard: pause queue='mail' changed=True" in lines
    assert "dashboard: resume queue='mail' changed=True" in lines
    [bulk] = [line for line in lines if line.startswith("dashboard: bulk cancel")]
    assert "queue='mail'" in bulk and "selected=2 changed=2" in bulk
    assert f"job_ids={jobs[1].id},{jobs[0].id}" in bulk


async def test_a_bulk_requeue_that_skips_a_job_says_why(
    make_app: Callable[..., Akadze], database_url: str
) -> None:
    app = build_app(make_app)

    @app.task("sync.account", queue="sync", max_attempts=1, unique=Unique(args=["account"]))
    async def sync(account: int) -> None:
        raise RuntimeError("remote down")

    held = await sync.enqueue(account=1)
    free = await sync.enqueue(account=2)
    await drain(app, queues=["sync"])
    newer = await sync.enqueue(account=1)  # holds account 1's key now
    async with client_for(create_app(app)) as client:
        confirm = await client.get("/jobs/bulk", params={"action": "requeue", "task": "sync.account"})
        assert '<strong id="bulk-count">2</strong>' in confirm.text
        form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', confirm.text))
        done = await client.post("/jobs/bulk", data=form)
        page = (await client.get(done.headers["location"])).text
    assert "Requeued 1 of 2 selected jobs." in page
    assert "1 not requeued: another job holds its unique key" in page
    states = dict(await fetch(database_url, "SELECT id, state FROM akadze_jobs"))
    assert (states[held.id], states[free.id], states[newer.id]) == ("failed", "queued", "queued")


async def test_a_schema_older_than_the_dashboard_gets_one_clear_answer(
    make_app: Callable[..., Akadze], database_url: str
) -> None:
    app = build_app(make_app)
    await execute(database_url, "ALTER TABLE akadze_queue_pauses RENAME TO akadze_queue_pauses_gone")
    try:
        web = create_app(app)
        transport = httpx.ASGITransport(app=web, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://dash.test") as client:
            page = await client.get("/queues")
        assert page.status_code == 503 and "akadze db migrate" in page.text
        assert "Traceback" not in page.text
    finally:
        await execute(database_url, "ALTER TABLE akadze_queue_pauses_gone RENAME TO akadze_queue_pauses")


async def test_delayed_jobs_stay_put_after_every_refusal(
    akadze_app: Akadze, client: httpx.AsyncClient
) -> None:
    job = await akadze_app.get_task("mail.send").using(delay=timedelta(hours=1)).enqueue(to="a")
    for headers in ({"origin": "http://evil.example"}, {"sec-fetch-site": "cross-site"}):
        csrf = await token(client)
        response = await client.post(f"/jobs/{job.id}/run-now", data={"csrf_token": csrf}, headers=headers)
        assert response.status_code == 403
    found = await akadze_app.get_job(job.id)
    assert found is not None and found.run_at > found.created_at + timedelta(minutes=30)
