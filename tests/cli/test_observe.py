"""akadze queues list, workers list, jobs explain and --output json, against a real database."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text
from typer.testing import CliRunner, Result

from akadze import Akadze, Job
from akadze.cli import app as cli
from akadze.db.queries import Queries
from akadze.testing import drain
from tests.support import module_database


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    return module_database(request, server_url, template_db)


def build(app: Akadze) -> None:
    @app.task("mail.send", queue="mail")
    async def send(user_id: int, secret: str = "") -> dict[str, int]:
        return {"sent": user_id}

    @app.task("report.build", max_attempts=1)
    async def report(report_id: int) -> None:
        raise RuntimeError(f"report {report_id} is broken")


class Db:
    def __init__(self, url: str) -> None:
        self.url = url

    def run(self, action: Callable[[Akadze], Any]) -> Any:
        async def go() -> Any:
            async with Akadze(database_url=self.url) as app:
                build(app)
                return await action(app)

        return asyncio.run(go())

    def enqueue(
        self, task: str, *, delay: timedelta | None = None, drained: bool = False, **kwargs: Any
    ) -> Job:
        async def action(app: Akadze) -> Job:
            job = await app.get_task(task).using(delay=delay).enqueue(**kwargs)
            if drained:
                await drain(app)
            found = await app.get_job(job.id)
            assert found is not None
            return found

        return self.run(action)

    def sql(self, statement: str, **params: Any) -> None:
        async def action(app: Akadze) -> None:
            async with app.engine.begin() as conn:
                await conn.execute(text(statement), params)

        self.run(action)

    def worker(self, name: str, queues: list[str], tasks: list[tuple[str, str, str]]) -> str:
        worker_id = str(uuid.uuid4())

        async def action(app: Akadze) -> None:
            async with app.engine.begin() as conn:
                await Queries.register_worker(
                    conn,
                    worker_id=worker_id,
                    name=name,
                    host="host",
                    pid=1,
                    queues=queues,
                    slots=7,
                    lost_after_s=60.0,
                    tasks=tasks,
                )

        self.run(action)
        return worker_id


@pytest.fixture
def db(database_url: str) -> Db:
    return Db(database_url)


@pytest.fixture
def akadze(database_url: str) -> Iterator[Callable[..., Result]]:
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(cli, list(args), env={"AKADZE_DATABASE_URL": database_url, "AKADZE_APP": ""})

    yield invoke


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)  # the whole of stdout is one document


def fp(db: Db, task: str) -> str:
    return str(db.run(lambda app: asyncio.sleep(0, app.get_task(task).args_fp)))


# -- workers list -------------------------------------------------------------------------------


def test_workers_list_shows_live_workers_with_the_jobs_they_run(
    db: Db, akadze: Callable[..., Result]
) -> None:
    live = db.worker("alpha", ["mail"], [])
    gone = db.worker("gone", ["mail"], [])
    db.sql(
        "UPDATE akadze_workers SET heartbeat_at = now() - interval '1 hour' WHERE id = CAST(:id AS uuid)",
        id=gone,
    )
    job = db.enqueue("mail.send", user_id=1)
    db.sql(
        "UPDATE akadze_jobs SET state = 'running', worker_id = CAST(:w AS uuid), started_at = now() "
        "WHERE id = :id",
        w=live,
        id=job.id,
    )
    found = as_json(akadze("workers", "list", "--output", "json"))
    assert [w["id"] for w in found] == [live]
    assert set(found[0]) >= {"id", "name", "queues", "slots", "started_at", "heartbeat_at", "running"}
    assert (found[0]["name"], found[0]["queues"], found[0]["slots"], found[0]["running"]) == (
        "alpha",
        ["mail"],
        7,
        1,
    )
    datetime.fromisoformat(found[0]["heartbeat_at"])

    result = akadze("workers", "list")
    assert result.exit_code == 0, result.stderr
    assert live in result.stdout and "gone" not in result.stdout


# -- jobs list / show --output json -------------------------------------------------------------


def test_jobs_list_and_show_as_json_use_job_field_names_and_hide_arguments(
    db: Db, akadze: Callable[..., Result]
) -> None:
    job = db.enqueue("mail.send", drained=True, user_id=5, secret="hush")
    listed = as_json(akadze("jobs", "list", "--output", "json"))
    assert [j["id"] for j in listed] == [job.id]
    assert set(listed[0]) == set(Job.__struct_fields__)
    assert listed[0]["state"] == "succeeded" and listed[0]["args"] is None
    assert "hush" not in akadze("jobs", "list", "--output", "json").stdout

    shown = as_json(akadze("jobs", "show", str(job.id), "--output", "json"))
    assert shown["id"] == job.id and shown["result"] == {"sent": 5} and shown["args"] is None
    with_args = as_json(akadze("jobs", "show", str(job.id), "--args", "--output", "json"))
    assert with_args["args"] == {"user_id": 5, "secret": "hush"}


def test_output_refuses_an_unknown_format(akadze: Callable[..., Result]) -> None:
    result = akadze("queues", "list", "--output", "yaml")
    assert result.exit_code == 2


# -- jobs explain -------------------------------------------------------------------------------


def explain(akadze: Callable[..., Result], job_id: int) -> dict[str, Any]:
    found: dict[str, Any] = as_json(akadze("jobs", "explain", str(job_id), "--output", "json"))
    return found


def codes(document: dict[str, Any]) -> list[str]:
    return [reason["code"] for reason in document["reasons"]]


def test_explain_a_queued_job_names_each_thing_that_holds_it(db: Db, akadze: Callable[..., Result]) -> None:
    job = db.enqueue("mail.send", delay=timedelta(minutes=5), user_id=1)
    document = explain(akadze, job.id)
    assert (document["id"], document["state"], document["queue"]) == (job.id, "queued", "mail")
    assert codes(document) == ["delayed", "no_live_worker"]
    assert job.run_at.isoformat(timespec="seconds") in document["reasons"][0]["message"]

    db.sql("INSERT INTO akadze_queue_pauses (queue) VALUES ('mail')")
    db.worker("w-other", ["mail"], [("report.build", "default", "x")])
    assert codes(explain(akadze, job.id)) == ["delayed", "queue_paused", "unknown_task"]

    db.sql("DELETE FROM akadze_queue_pauses")
    db.sql("UPDATE akadze_jobs SET run_at = now() - interval '3 seconds'")
    db.worker("w-mail", ["mail"], [("mail.send", "mail", fp(db, "mail.send"))])
    document = explain(akadze, job.id)
    assert codes(document) == ["ready"]

    result = akadze("jobs", "explain", str(job.id))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"job {job.id} (mail.send in queue mail) is queued:"
    assert "ready since" in result.stdout


def test_explain_running_and_finished_jobs(db: Db, akadze: Callable[..., Result]) -> None:
    worker = db.worker("runner-1", ["mail"], [])
    job = db.enqueue("mail.send", user_id=1)
    db.sql(
        "UPDATE akadze_jobs SET state = 'running', attempt = 1, worker_id = CAST(:w AS uuid), "
        "started_at = now() - interval '2 minutes' WHERE id = :id",
        w=worker,
        id=job.id,
    )
    document = explain(akadze, job.id)
    assert codes(document) == ["running"]
    assert (
        "runner-1" in document["reasons"][0]["message"]
        and "attempt 1 of 3" in document["reasons"][0]["message"]
    )
    db.sql("DELETE FROM akadze_workers")
    assert codes(explain(akadze, job.id)) == ["worker_lost"]

    failed = db.enqueue("report.build", drained=True, report_id=9)
    document = explain(akadze, failed.id)
    assert codes(document) == ["failed"]
    assert "RuntimeError: report 9 is broken" in document["reasons"][0]["message"]
    done = db.enqueue("mail.send", drained=True, user_id=2)
    assert codes(explain(akadze, done.id)) == ["succeeded"]


def test_explain_a_missing_job_exits_1(akadze: Callable[..., Result]) -> None:
    result = akadze("jobs", "explain", "999999")
    assert result.exit_code == 1
    assert result.stdout == ""


def test_explain_names_the_limit_that_holds_a_job_and_the_jobs_filling_it(database_url: str) -> None:
    """With the app (which knows the task's Limit), the permits say the job is held and by whom."""
    from akadze import Limit
    from akadze.cli.jobs import _explain

    async def go() -> tuple[Any, Any, int, Any]:
        async with Akadze(database_url=database_url) as app:

            @app.task("api.call", limit=Limit(concurrency=1, key="account"))
            async def call(account: int, secret: str = "") -> None:
                return None

            first = await call.enqueue(account=5, secret="SECRET-A")
            second = await call.enqueue(account=5, secret="SECRET-B")
            other = await call.enqueue(account=6)
            async with app.engine.begin() as conn:
                await conn.execute(
                    text(
                        "UPDATE akadze_jobs SET state = 'running', run = 1, started_at = now(), "
                        "limit_grp = CAST(jsonb_build_array(task, args -> 'account') AS text) WHERE id = :id"
                    ),
                    {"id": first.id},
                )
            async with app.engine.connect() as conn:
                held = await _explain(conn, second.id, app)
                free = await _explain(conn, other.id, app)
                bare = await _explain(conn, second.id, Akadze(database_url=database_url))
            return held, free, first.id, bare

    held, free, first_id, bare = asyncio.run(go())
    (reason,) = [r for r in held.reasons if r.code == "held_by_limit"]
    assert (
        reason.message
        == f"held by its limit (concurrency 1 per account, all taken); jobs filling it: {first_id}"
    )
    assert "SECRET" not in reason.message and "5" not in reason.message.replace(str(first_id), "")
    assert "held_by_limit" not in codes(msgspec_dict(free))
    # without the app the limit is unknown: only what the database says (the job was parked by
    # its enqueue, as a producer that knows the Limit parks it), not which jobs fill it
    (parked,) = [r for r in bare.reasons if r.code == "held_by_limit"]
    assert parked.message.startswith("held by its limit: parked (by its enqueue")


def msgspec_dict(explanation: Any) -> dict[str, Any]:
    import msgspec

    document: dict[str, Any] = msgspec.to_builtins(explanation)
    return document
