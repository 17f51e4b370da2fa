"""akadze jobs list / show / cancel / requeue against a real database."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import text
from typer.testing import CliRunner, Result

from akadze import Akadze, Job, JobState
from akadze.cli import app as cli
from akadze.testing import drain
from tests.support import module_database


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


class Jobs:
    """The test's database, with a few tasks to make jobs of (run in their own event loop)."""

    def __init__(self, database_url: str) -> None:
        self.database_url = database_url

    def run(self, action: Callable[[Akadze], Any]) -> Any:
        async def go() -> Any:
            async with Akadze(database_url=self.database_url) as app:

                @app.task("mail.send", queue="mail")
                async def send(user_id: int, secret: str = "") -> dict[str, int]:
                    return {"sent": user_id}

                @app.task("report.build", max_attempts=2)
                async def build(report_id: int) -> None:
                    raise RuntimeError(f"report {report_id} is broken")

                return await action(app)

        return asyncio.run(go())

    def enqueue(self, task: str, *, drained: bool = False, **kwargs: Any) -> Job:
        async def action(app: Akadze) -> Job:
            job = await app.get_task(task).enqueue(**kwargs)
            if drained:
                await drain(app)
            found = await app.get_job(job.id)
            assert found is not None
            return found

        return self.run(action)

    def failed(self, report_id: int = 1) -> Job:
        async def action(app: Akadze) -> Job:
            task = app.get_task("report.build")
            job = await task.using(run_at=datetime.now(UTC) - timedelta(hours=1)).enqueue(report_id=report_id)
            await drain(app)
            async with app.engine.begin() as conn:
                # the retry is due now, not after its backoff
                await conn.execute(text("UPDATE akadze_jobs SET run_at = now() WHERE state = 'queued'"))
            await drain(app)
            found = await app.get_job(job.id)
            assert found is not None
            assert found.state is JobState.FAILED
            return found

        return self.run(action)

    def get(self, job_id: int) -> Job:
        async def action(app: Akadze) -> Job:
            found = await app.get_job(job_id)
            assert found is not None
            return found

        return self.run(action)


@pytest.fixture
def jobs(database_url: str) -> Jobs:
    return Jobs(database_url)


@pytest.fixture
def akadze(database_url: str) -> Iterator[Callable[..., Result]]:
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        return runner.invoke(cli, list(args), env={"AKADZE_DATABASE_URL": database_url, "AKADZE_APP": ""})

    yield invoke


def table(result: Result) -> list[list[str]]:
    return [line.split() for line in result.stdout.splitlines()]


# -- list ---------------------------------------------------------------------------------------


def test_jobs_list_prints_a_table_newest_first(jobs: Jobs, akadze: Callable[..., Result]) -> None:
    first = jobs.enqueue("mail.send", user_id=1)
    second = jobs.enqueue("mail.send", drained=True, user_id=2)
    result = akadze("jobs", "list")
    assert result.exit_code == 0, result.stderr
    rows = table(result)
    assert rows[0] == ["ID", "TASK", "QUEUE", "STATE", "ATTEMPT", "RUN", "AT", "FINISHED", "AT"]
    assert [row[:5] for row in rows[1:]] == [
        [str(second.id), "mail.send", "mail", "succeeded", "1/3"],
        [str(first.id), "mail.send", "mail", "succeeded", "1/3"],
    ]


def test_jobs_list_filters_by_state_task_and_queue_and_limits(
    jobs: Jobs, akadze: Callable[..., Result]
) -> None:
    mail = [jobs.enqueue("mail.send", user_id=n).id for n in range(3)]
    failed = jobs.failed().id

    def ids(*args: str) -> list[int]:
        result = akadze("jobs", "list", *args)
        assert result.exit_code == 0, result.stderr
        return [int(row[0]) for row in table(result)[1:]]

    assert ids("--state", "failed") == [failed]
    assert ids("--state", "succeeded") == mail[::-1]
    assert ids("--task", "report.build") == [failed]
    assert ids("--queue", "mail") == mail[::-1]
    assert ids("--queue", "mail", "--limit", "2") == mail[:0:-1]
    assert ids("--state", "cancelled") == []


def test_jobs_list_rejects_an_unknown_state(akadze: Callable[..., Result]) -> None:
    result = akadze("jobs", "list", "--state", "sleeping")
    assert result.exit_code == 2
    assert "Traceback" not in result.output


# -- show ---------------------------------------------------------------------------------------


def test_jobs_show_prints_every_field_with_the_errors_but_not_the_arguments(
    jobs: Jobs, akadze: Callable[..., Result]
) -> None:
    job = jobs.failed(report_id=77)
    result = akadze("jobs", "show", str(job.id))
    assert result.exit_code == 0, result.stderr
    fields = {
        line.split(maxsplit=1)[0]: line.split(maxsplit=1)[1:]
        for line in result.stdout.splitlines()
        if line[:1] != " "
    }
    for name in (
        "id",
        "task",
        "queue",
        "state",
        "priority",
        "attempt",
        "max_attempts",
        "run",
        "run_at",
        "expires_at",
        "cancel_requested",
        "worker_id",
        "created_at",
        "started_at",
        "finished_at",
        "result",
        "args",
        "errors",
    ):
        assert name in fields, name
    assert fields["state"] == ["failed"]
    assert fields["errors"] == ["2"]
    assert "attempt 1 at" in result.stdout
    assert "RuntimeError: report 77 is broken" in result.stdout
    assert '"report_id"' not in result.stdout
    shown = akadze("jobs", "show", str(job.id), "--args")
    assert shown.exit_code == 0
    assert '{"report_id":77}' in shown.stdout


def test_jobs_show_never_prints_arguments_without_being_asked(
    jobs: Jobs, akadze: Callable[..., Result]
) -> None:
    job = jobs.enqueue("mail.send", user_id=5, secret="CANARY-5a1e")
    result = akadze("jobs", "show", str(job.id))
    assert result.exit_code == 0
    assert "CANARY-5a1e" not in result.output
    assert "CANARY-5a1e" not in akadze("jobs", "list").output


def test_jobs_show_of_a_missing_job_exits_1(akadze: Callable[..., Result]) -> None:
    result = akadze("jobs", "show", "424242")
    assert result.exit_code == 1
    assert result.stderr.strip() == "job 424242 does not exist"


# -- cancel -------------------------------------------------------------------------------------


def test_jobs_cancel_cancels_a_queued_job(jobs: Jobs, akadze: Callable[..., Result]) -> None:
    job = jobs.enqueue("mail.send", user_id=1)
    result = akadze("jobs", "cancel", str(job.id))
    assert result.exit_code == 0, result.stderr
    assert str(job.id) in result.stdout
    assert jobs.get(job.id).state is JobState.CANCELLED


def test_jobs_cancel_of_a_queued_job_says_it_was_cancelled(jobs: Jobs, akadze: Callable[..., Result]) -> None:
    job = jobs.enqueue("mail.send", user_id=1)
    result = akadze("jobs", "cancel", str(job.id))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == f"job {job.id} cancelled"


def test_jobs_cancel_of_a_running_job_says_the_cancel_was_requested(
    jobs: Jobs, akadze: Callable[..., Result]
) -> None:
    job = jobs.enqueue("mail.send", user_id=1)

    async def claim(app: Akadze) -> None:
        async with app.engine.begin() as conn:
            await conn.execute(
                text("UPDATE akadze_jobs SET state = 'running', run = run + 1 WHERE id = :id"), {"id": job.id}
            )

    jobs.run(claim)
    result = akadze("jobs", "cancel", str(job.id))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"cancel requested for job {job.id}: it is running")
    assert jobs.get(job.id).cancel_requested


@pytest.mark.parametrize("which", ["succeeded", "cancelled"])
def test_jobs_cancel_of_a_job_that_is_not_active_exits_1(
    jobs: Jobs, akadze: Callable[..., Result], which: str
) -> None:
    job_id = jobs.enqueue("mail.send", drained=which == "succeeded", user_id=1).id
    if which == "cancelled":
        assert akadze("jobs", "cancel", str(job_id)).exit_code == 0
    result = akadze("jobs", "cancel", str(job_id))
    assert result.exit_code == 1
    said = "has succeeded" if which == "succeeded" else "was cancelled"
    assert result.stderr.strip() == f"job is not active: job {job_id} {said}"
    assert result.stdout == ""


def test_jobs_cancel_of_a_missing_job_says_it_does_not_exist(akadze: Callable[..., Result]) -> None:
    result = akadze("jobs", "cancel", "999999")
    assert result.exit_code == 1
    assert result.stderr.strip() == "job 999999 does not exist"
    assert result.stdout == ""


@pytest.mark.parametrize("command", ["show", "cancel", "requeue"])
@pytest.mark.parametrize(
    ("given", "words"),
    [
        ("99999999999999999999", ("out of range", "9223372036854775807")),
        ("0", ("out of range",)),
        ("-5", ("out of range",)),
        ("abc", ("not a number",)),
    ],
    ids=["over-bigint", "zero", "negative", "not-a-number"],
)
def test_a_job_id_postgres_cannot_hold_is_one_line_and_exit_2(
    akadze: Callable[..., Result], command: str, given: str, words: tuple[str, ...]
) -> None:
    result = akadze("jobs", command, "--", given) if given.startswith("-") else akadze("jobs", command, given)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert all(word in lines[0] for word in words), lines[0]
    assert "SELECT" not in result.stderr and "Traceback" not in result.stderr


# -- requeue ------------------------------------------------------------------------------------


def test_jobs_requeue_puts_a_failed_job_back(jobs: Jobs, akadze: Callable[..., Result]) -> None:
    job = jobs.failed()
    result = akadze("jobs", "requeue", str(job.id))
    assert result.exit_code == 0, result.stderr
    assert "attempt 2 of 3" in result.stdout
    after = jobs.get(job.id)
    assert (after.state, after.attempt, after.max_attempts, after.errors) == (
        JobState.QUEUED,
        2,
        3,
        job.errors,
    )


@pytest.mark.parametrize("which", ["queued", "succeeded"])
def test_jobs_requeue_of_a_job_that_is_neither_failed_nor_cancelled_exits_1_naming_its_state(
    jobs: Jobs, akadze: Callable[..., Result], which: str
) -> None:
    job_id = jobs.enqueue("mail.send", drained=which == "succeeded", user_id=1).id
    result = akadze("jobs", "requeue", str(job_id))
    assert result.exit_code == 1
    said = "is queued" if which == "queued" else "has succeeded"
    assert result.stderr.strip() == f"job {job_id} {said}: only failed or cancelled jobs can be requeued"


def test_jobs_requeue_puts_a_cancelled_job_back(jobs: Jobs, akadze: Callable[..., Result]) -> None:
    job_id = jobs.enqueue("mail.send", user_id=1).id
    assert akadze("jobs", "cancel", str(job_id)).exit_code == 0
    result = akadze("jobs", "requeue", str(job_id))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.strip() == f"job {job_id} requeued (attempt 0 of 3)"
    after = jobs.get(job_id)
    assert (after.state, after.cancel_requested) == (JobState.QUEUED, False)


def test_jobs_requeue_of_a_missing_job_says_it_does_not_exist(akadze: Callable[..., Result]) -> None:
    result = akadze("jobs", "requeue", "999999")
    assert result.exit_code == 1
    assert result.stderr.strip() == "job 999999 does not exist"


def test_jobs_commands_find_the_database_through_the_app_or_the_option(jobs: Jobs, database_url: str) -> None:
    job = jobs.enqueue("mail.send", user_id=1)
    result = CliRunner().invoke(
        cli,
        ["jobs", "cancel", str(job.id), "--app", "tests.apps.basic:from_environment"],
        env={"AKADZE_DATABASE_URL": "", "AKADZE_APP": "", "BASIC_APP_DATABASE_URL": database_url},
    )
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(
        cli,
        ["jobs", "show", str(job.id), "--database-url", database_url],
        env={"AKADZE_DATABASE_URL": "", "AKADZE_APP": ""},
    )
    assert result.exit_code == 0, result.output
    assert "cancelled" in result.stdout
