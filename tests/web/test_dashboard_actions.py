"""Every action of the dashboard over HTTP against the real database: cancel, requeue, run now,
pause, resume and the bulk actions change what they say; a POST without its CSRF token, from
another site, refused by auth, or to a read-only dashboard changes nothing; the dashboard's
logs carry no argument."""

from __future__ import annotations

import logging
import re
from datetime import timedelta

import httpx
import pytest
from starlette.requests import Request

from akadze import Akadze, JobState, Workflow
from akadze.testing import drain
from akadze.web import create_app
from tests.support import execute, fetch, fetchval, module_database
from tests.web.conftest import client_for, token


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


async def state_of(app: Akadze, job_id: int) -> JobState:
    job = await app.get_job(job_id)
    assert job is not None
    return job.state


async def test_cancel_ends_a_queued_job_and_refuses_a_finished_one(
    akadze_app: Akadze, client: httpx.AsyncClient
) -> None:
    job = await akadze_app.get_task("mail.send").enqueue(to="a")
    csrf = await token(client, f"/jobs/{job.id}")
    done = await client.post(f"/jobs/{job.id}/cancel", data={"csrf_token": csrf})
    assert done.status_code == 303 and done.headers["location"] == f"/jobs/{job.id}?done=cancel"
    assert await state_of(akadze_app, job.id) is JobState.CANCELLED
    assert "The job is cancelled: it will not run." in (await client.get(done.headers["location"])).text
    again = await client.post(f"/jobs/{job.id}/cancel", data={"csrf_token": csrf})
    assert again.status_code == 409
    assert f"job {job.id} was cancelled" in again.text
    assert (await client.post("/jobs/424242/cancel", data={"csrf_token": csrf})).status_code == 409


async def test_requeue_puts_a_failed_job_back_and_refuses_others(
    akadze_app: Akadze, client: httpx.AsyncClient
) -> None:
    job = await akadze_app.get_task("report.build").enqueue(n=1)
    await drain(akadze_app, queues=["reports"])
    csrf = await token(client, f"/jobs/{job.id}")
    assert "/requeue" in (await client.get(f"/jobs/{job.id}")).text
    done = await client.post(f"/jobs/{job.id}/requeue", data={"csrf_token": csrf})
    assert done.status_code == 303
    assert await state_of(akadze_app, job.id) is JobState.QUEUED
    refused = await client.post(f"/jobs/{job.id}/requeue", data={"csrf_token": csrf})
    assert refused.status_code == 409 and "only a failed or cancelled job" in refused.text


async def test_requeue_puts_a_cancelled_job_back(akadze_app: Akadze, client: httpx.AsyncClient) -> None:
    job = await akadze_app.get_task("mail.send").enqueue(to="a")
    csrf = await token(client, f"/jobs/{job.id}")
    assert "/requeue" not in (await client.get(f"/jobs/{job.id}")).text
    assert (await client.post(f"/jobs/{job.id}/cancel", data={"csrf_token": csrf})).status_code == 303
    assert await state_of(akadze_app, job.id) is JobState.CANCELLED
    assert f"/jobs/{job.id}/requeue" in (await client.get(f"/jobs/{job.id}")).text
    done = await client.post(f"/jobs/{job.id}/requeue", data={"csrf_token": csrf})
    assert done.status_code == 303
    assert await state_of(akadze_app, job.id) is JobState.QUEUED


async def test_run_now_makes_a_delayed_job_ready(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    job = await akadze_app.get_task("mail.send").using(delay=timedelta(hours=2)).enqueue(to="a")
    page = (await client.get(f"/jobs/{job.id}")).text
    assert f"/jobs/{job.id}/run-now" in page
    csrf = await token(client, f"/jobs/{job.id}")
    done = await client.post(f"/jobs/{job.id}/run-now", data={"csrf_token": csrf})
    assert done.status_code == 303
    assert await fetchval(database_url, "SELECT run_at <= now() FROM akadze_jobs WHERE id = $1", job.id)
    assert (await client.post(f"/jobs/{job.id}/run-now", data={"csrf_token": csrf})).status_code == 409


async def test_pause_and_resume_a_queue_and_say_what_changed(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    csrf = await token(client, "/queues")
    paused = await client.post("/queues/mail/pause", data={"csrf_token": csrf})
    assert paused.status_code == 303 and "done=paused" in paused.headers["location"]
    assert await fetch(database_url, "SELECT queue FROM akadze_queue_pauses") == [("mail",)]
    again = await client.post("/queues/mail/pause", data={"csrf_token": csrf})
    assert "done=already-paused" in again.headers["location"]
    page = (await client.get("/queues")).text
    assert "/queues/mail/resume" in page and "/queues/mail/pause" not in page
    resumed = await client.post("/queues/mail/resume", data={"csrf_token": csrf})
    assert "done=resumed" in resumed.headers["location"]
    assert await fetch(database_url, "SELECT queue FROM akadze_queue_pauses") == []
    odd = await client.post("/queues/a%2Fb%20c/pause", data={"csrf_token": csrf})
    assert odd.status_code == 303
    assert await fetch(database_url, "SELECT queue FROM akadze_queue_pauses") == [("a/b c",)]


async def test_bulk_cancel_confirms_a_count_and_takes_only_what_it_counted(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    send = akadze_app.get_task("mail.send")
    await send.enqueue_many([{"to": str(n)} for n in range(5)])
    other = await akadze_app.get_task("report.build").using(delay=timedelta(hours=1)).enqueue(n=1)
    confirm = await client.get("/jobs/bulk", params={"action": "cancel", "queue": "mail"})
    assert '<strong id="bulk-count">5</strong>' in confirm.text
    form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', confirm.text))
    assert form["count"] == "5" and form["csrf_token"]
    # a job enqueued after the confirmation is not taken
    late = await send.enqueue(to="late")
    done = await client.post("/jobs/bulk", data=form)
    assert done.status_code == 303
    assert "done=bulk-cancel" in done.headers["location"] and "n=5&of=5" in done.headers["location"]
    states = dict(await fetch(database_url, "SELECT id, state FROM akadze_jobs"))
    assert sorted(states.values()).count("cancelled") == 5
    assert states[late.id] == "queued" and states[other.id] == "queued"
    assert "Cancel requested for 5 of 5" in (await client.get(done.headers["location"])).text


async def test_bulk_requeue_takes_the_failed_jobs_of_the_filter(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    await akadze_app.get_task("report.build").enqueue_many([{"n": n} for n in range(3)])
    await drain(akadze_app, queues=["reports"])
    await akadze_app.get_task("mail.send").enqueue(to="a")
    confirm = await client.get("/jobs/bulk", params={"action": "requeue", "task": "report.build"})
    assert '<strong id="bulk-count">3</strong>' in confirm.text
    form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', confirm.text))
    done = await client.post("/jobs/bulk", data=form)
    assert "n=3&of=3" in done.headers["location"]
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs WHERE state = 'queued'") == 4
    # cancelled jobs are requeued too
    await execute(database_url, "UPDATE akadze_jobs SET state = 'cancelled', finished_at = now()")
    confirm = await client.get("/jobs/bulk", params={"action": "requeue"})
    assert '<strong id="bulk-count">4</strong>' in confirm.text
    nothing = await client.get("/jobs/bulk", params={"action": "requeue", "state": "succeeded"})
    assert '<strong id="bulk-count">0</strong>' in nothing.text and '<form method="post"' not in nothing.text


async def test_a_bulk_action_is_bounded(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    from akadze.web import bulk as pages

    await akadze_app.get_task("mail.send").enqueue_many([{"to": str(n)} for n in range(pages.BULK_LIMIT + 5)])
    confirm = await client.get("/jobs/bulk", params={"action": "cancel"})
    assert f'<strong id="bulk-count">{pages.BULK_LIMIT}</strong>' in confirm.text
    assert "more match" in confirm.text
    form = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', confirm.text))
    form["count"] = str(pages.BULK_LIMIT * 10)
    await client.post("/jobs/bulk", data=form)
    assert await fetchval(database_url, "SELECT count(*) FROM akadze_jobs WHERE state = 'cancelled'") == (
        pages.BULK_LIMIT
    )


ACTIONS = [
    "/jobs/{id}/cancel",
    "/jobs/{id}/requeue",
    "/jobs/{id}/run-now",
    "/queues/mail/pause",
    "/jobs/bulk",
    "/workflows/{workflow}/cancel",
]


async def _unchanged_after(
    client: httpx.AsyncClient,
    app: Akadze,
    database_url: str,
    *,
    data: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> list[int]:
    """POSTs every action for a delayed queued job; returns the status codes and checks that
    nothing changed."""
    job = await app.get_task("mail.send").using(delay=timedelta(hours=1)).enqueue(to="a")
    flow = await Workflow().add("step", app.get_task("mail.send").bind(to="b")).enqueue()
    before = await fetch(database_url, "SELECT id, state, run_at FROM akadze_jobs ORDER BY id")
    codes = []
    for path in ACTIONS:
        form = {"action": "cancel", "max_id": str(job.id), "count": "1", **(data or {})}
        target = path.format(id=job.id, workflow=flow["step"].workflow_id)
        response = await client.post(target, data=form, headers=headers or {})
        codes.append(response.status_code)
    assert await fetch(database_url, "SELECT id, state, run_at FROM akadze_jobs ORDER BY id") == before
    assert await fetch(database_url, "SELECT * FROM akadze_queue_pauses") == []
    return codes


async def test_a_post_without_its_csrf_token_changes_nothing(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    await token(client)  # the cookie is set: only the field is missing
    assert await _unchanged_after(client, akadze_app, database_url) == [403] * len(ACTIONS)
    wrong = {"csrf_token": "x" * 43}
    assert await _unchanged_after(client, akadze_app, database_url, data=wrong) == [403] * len(ACTIONS)


async def test_a_post_from_another_site_changes_nothing(
    akadze_app: Akadze, client: httpx.AsyncClient, database_url: str
) -> None:
    csrf = await token(client)
    for site in ("cross-site", "same-site"):
        codes = await _unchanged_after(
            client, akadze_app, database_url, data={"csrf_token": csrf}, headers={"sec-fetch-site": site}
        )
        assert codes == [403] * len(ACTIONS)


async def test_a_read_only_dashboard_renders_no_form_and_refuses_every_action(
    akadze_app: Akadze, database_url: str
) -> None:
    job = await akadze_app.get_task("report.build").enqueue(n=1)
    await drain(akadze_app, queues=["reports"])
    async with client_for(create_app(akadze_app, read_only=True)) as client:
        for path in (
            "/",
            "/jobs",
            f"/jobs/{job.id}",
            "/queues",
            "/schedules",
            "/workers",
            "/jobs/bulk?action=cancel",
        ):
            page = await client.get(path)
            assert page.status_code == 200
            assert '<form method="post"' not in page.text and "csrf_token" not in page.text, path
            assert "/jobs/bulk?" not in page.text
        assert "read-only" in (await client.get("/")).text
        cookie = (await client.get("/jobs")).cookies.get("akadze_csrf") or "t" * 43
        client.cookies.set("akadze_csrf", cookie)
        codes = await _unchanged_after(client, akadze_app, database_url, data={"csrf_token": cookie})
        assert codes == [403] * len(ACTIONS)


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_auth_refusal_gets_403_and_changes_nothing(
    akadze_app: Akadze, database_url: str, kind: str
) -> None:
    def sync_auth(request: Request) -> bool:
        return request.headers.get("x-operator") == "yes"

    async def async_auth(request: Request) -> bool:
        return sync_auth(request)

    web = create_app(akadze_app, auth=sync_auth if kind == "sync" else async_auth)
    async with client_for(web) as client:
        assert (await client.get("/")).status_code == 403
        assert (await client.get("/static/dashboard.css")).status_code == 403
        client.headers["x-operator"] = "yes"
        csrf = await token(client)
        client.headers["x-operator"] = "no"
        codes = await _unchanged_after(client, akadze_app, database_url, data={"csrf_token": csrf})
        assert codes == [403] * len(ACTIONS)
        client.headers["x-operator"] = "yes"
        job = await akadze_app.get_task("mail.send").enqueue(to="b")
        done = await client.post(f"/jobs/{job.id}/cancel", data={"csrf_token": csrf})
        assert done.status_code == 303
        assert await state_of(akadze_app, job.id) is JobState.CANCELLED


def test_create_app_refuses_bad_options(akadze_app: Akadze) -> None:
    from akadze.errors import ConfigError

    with pytest.raises(ConfigError, match="Akadze app"):
        create_app(object())  # type: ignore[arg-type]  # the wrong type is the point
    with pytest.raises(ConfigError, match="auth must be a callable"):
        create_app(akadze_app, auth="admin")  # type: ignore[arg-type]  # the wrong type is the point
    with pytest.raises(ConfigError, match="read_only"):
        create_app(akadze_app, read_only="yes")  # type: ignore[arg-type]  # the wrong type is the point


async def test_the_dashboards_logs_carry_no_argument(
    akadze_app: Akadze, client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="akadze")
    secret = "secret-arg-5678"
    jobs = [await akadze_app.get_task("mail.send").enqueue(to=secret, body=secret) for _ in range(3)]
    failed = await akadze_app.get_task("report.build").enqueue(n=4)
    await drain(akadze_app, queues=["reports"])
    csrf = await token(client)
    await client.get(f"/jobs/{jobs[0].id}?show=args")
    await client.post(f"/jobs/{jobs[0].id}/cancel", data={"csrf_token": csrf})
    await client.post(f"/jobs/{jobs[0].id}/cancel")
    await client.post(f"/jobs/{failed.id}/requeue", data={"csrf_token": csrf})
    confirm = await client.get("/jobs/bulk", params={"action": "cancel"})
    await client.post("/jobs/bulk", data=dict(re.findall(r'name="([^"]+)" value="([^"]*)"', confirm.text)))
    logged = [r for r in caplog.records if r.name.startswith("akadze.web")]
    assert len(logged) >= 4
    leaks = [f"{r.name}: {r.getMessage()}" for r in caplog.records if secret in r.getMessage()]
    assert leaks == []


async def test_an_action_on_an_id_beyond_bigint_changes_nothing(client: httpx.AsyncClient) -> None:
    csrf = await token(client)
    for action in ("cancel", "requeue", "run-now"):
        response = await client.post(f"/jobs/{2**70}/{action}", data={"csrf_token": csrf})
        assert response.status_code == 409 and "there is no job" in response.text
