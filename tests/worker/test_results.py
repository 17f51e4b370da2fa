"""The body's return value after complete_tx committed: stored with the outcome writes' retry
rules, or logged (never its value) when it cannot be."""

from __future__ import annotations

import logging

import pytest

from akadze import Akadze, JobState, current
from akadze.testing import drain
from tests.support import execute, module_database

CANARY = "CANARY-93b1"


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    return module_database(request, server_url, template_db)


def refuse_results(*, sqlstate: str, times: str) -> list[str]:
    """A trigger that refuses the result write (``times``: 'once' or 'always')."""
    condition = "nextval('refusals') = 1" if times == "once" else "true"
    return [
        "CREATE SEQUENCE IF NOT EXISTS refusals",
        f"""CREATE OR REPLACE FUNCTION refuse_result() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NEW.result IS DISTINCT FROM OLD.result AND OLD.state = 'succeeded' AND {condition} THEN
                RAISE EXCEPTION 'result refused' USING ERRCODE = '{sqlstate}';
            END IF;
            RETURN NEW;
        END $$""",
        "CREATE OR REPLACE TRIGGER refuse_result BEFORE UPDATE ON akadze_jobs "
        "FOR EACH ROW EXECUTE FUNCTION refuse_result()",
    ]


def committing_task(app: Akadze) -> object:
    @app.task("t")
    async def t() -> dict[str, str]:
        async with current().complete_tx():
            pass
        return {"secret": CANARY}

    return t


async def test_a_result_write_that_meets_a_transient_error_is_tried_again(
    app: Akadze, database_url: str
) -> None:
    await execute(database_url, *refuse_results(sqlstate="55P03", times="once"))
    t = committing_task(app)
    job = await t.enqueue()  # type: ignore[attr-defined]
    await drain(app)
    stored = await app.get_job(job.id)
    assert stored is not None
    assert stored.state is JobState.SUCCEEDED
    assert stored.result == {"secret": CANARY}


async def test_a_result_that_cannot_be_stored_is_logged_without_its_value(
    app: Akadze, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await execute(database_url, *refuse_results(sqlstate="P0001", times="always"))
    t = committing_task(app)
    job = await t.enqueue()  # type: ignore[attr-defined]
    await drain(app)
    stored = await app.get_job(job.id)
    assert stored is not None
    assert (stored.state, stored.result) == (JobState.SUCCEEDED, None)
    lines = [r for r in caplog.records if "result could not be stored" in r.getMessage()]
    assert len(lines) == 1 and lines[0].levelno == logging.ERROR
    assert f"job_id={job.id}" in lines[0].getMessage()
    assert CANARY not in caplog.text
