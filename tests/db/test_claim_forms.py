"""The worker's claim in three forms: claim_completing.sql, and for outcomes none of which is a
workflow step, claim_completing_plain.sql (up to MANY_QUEUES queues, one queue at a time) or
claim_completing_plain_many.sql (past them, one walk over every queue). A plain form is the
same write, claim and reply without the settle step, reading the ready jobs one way only; it
passes over a step that ends at its claim, which a second claim, with the settle step, ends at
once with the steps after it (docs/performance.md)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from akadze import Akadze, JobState, Workflow
from akadze.db.pooled import POOLED
from akadze.db.queries import Queries
from akadze.db.queries.runs import MANY_QUEUES
from akadze.db.sql import statement
from akadze.outcomes import Completion, Transition, Verdict
from tests.support import fetch, module_database, plain


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    """One database for this module's tests, reset before each (tests/support.py)."""
    return module_database(request, server_url, template_db)


def _between(source: str, start: str, end: str) -> str:
    """``source`` from ``start`` up to the first ``end`` after it, or to its end."""
    at = source.index(start)
    stop = source.find(end, at + len(start))
    return source[at : stop if stop >= 0 else len(source)]


@pytest.mark.parametrize(
    ("form", "reads", "leaves"),
    [
        # up to MANY_QUEUES queues: one queue at a time ({per_queue}) and nothing else
        ("claim_completing_plain", ("per_queue AS (", "\n),\n"), ("many_level", "across_queues")),
        # past them: the one walk over every queue ({across_queues}) and nothing else
        ("claim_completing_plain_many", ("many_level AS (", ",\nclaimed AS ("), ("per_queue",)),
    ],
)
def test_a_plain_form_is_the_claim_without_the_settle_step_reading_one_way(
    form: str, reads: tuple[str, str], leaves: tuple[str, ...]
) -> None:
    full = statement("claim_completing").source
    bare = statement(form).source
    # the same outcome write ({write_outcomes}), then the same reads of the ready jobs, one way
    assert bare.startswith(full[: full.index("per_queue AS (")])
    assert _between(full, *reads) in bare
    for name in leaves:
        assert name not in bare, name
    # the same claimed rows and written rows ({claim_set}, {claim_returning}, {claim_reply})
    claimed, claimed_bare = _between(full, "claimed AS (", "\n)"), _between(bare, "claimed AS (", "\n)")
    assert _between(claimed_bare, "SET", "WHERE") == _between(claimed, "SET", "WHERE")
    assert _between(claimed_bare, "RETURNING", "\n)") == _between(claimed, "RETURNING", "\n)")
    assert _between(full, "\nSELECT claimed.", "\nUNION ALL\nSELECT settled.") in bare
    # no step is settled: neither the edges nor the settle step's CTEs
    assert "akadze_job_deps" in full
    for name in ("akadze_job_deps", "ended", "settled", "reach", "doomed"):
        assert name not in bare, name
    assert statement(form).params == statement("claim_completing").params
    assert {"claim_completing", form} <= set(POOLED)


async def _forms(conn: asyncpg.Connection) -> set[str]:
    """The claim forms prepared on ``conn`` (a direct connection prepares what it runs)."""
    rows = await conn.fetch("SELECT name FROM pg_prepared_statements WHERE name LIKE '__akadze_claim%'")
    return {row["name"].removeprefix("__akadze_").removesuffix("__").rsplit("_", 1)[0] for row in rows}


@pytest.mark.parametrize(
    ("queues", "form"),
    [
        (["default"], "claim_completing_plain"),
        (["default", *(f"q{n}" for n in range(MANY_QUEUES))], "claim_completing_plain_many"),
    ],
)
async def test_a_claim_of_plain_jobs_runs_its_plain_form_only(
    app: Akadze, database_url: str, queues: list[str], form: str
) -> None:
    @app.task("forms.job")
    async def job(n: int) -> None:
        pass

    ids = [(await job.enqueue(n)).id for n in range(3)]
    conn = await asyncpg.connect(plain(database_url))
    try:
        claimed = await Queries.claim(conn, queues, 10, str(uuid.uuid4()))
        assert sorted(j.id for j in claimed) == ids
        assert await _forms(conn) == {form}
        # the outcomes alone (no queue): the form of a few queues
        done = Transition(JobState.SUCCEEDED, 1, None, cancellable=True, verdict=Verdict.SUCCEEDED)
        ended = [Completion(j.id, j.run, done, None, plain=True) for j in claimed]
        written, _ = await Queries.complete_batch(conn, ended)
        assert [w.id for w in written] == ids
        assert await _forms(conn) == {form, "claim_completing_plain"}
    finally:
        await conn.close()


@pytest.mark.parametrize(
    ("queues", "form"),
    [
        (["default"], "claim_completing_plain"),
        (["default", *(f"q{n}" for n in range(MANY_QUEUES))], "claim_completing_plain_many"),
    ],
)
async def test_a_step_that_ends_at_its_claim_is_claimed_again_with_the_settle_step(
    app: Akadze, database_url: str, queues: list[str], form: str
) -> None:
    @app.task("forms.step")
    async def step(name: str) -> None:
        pass

    before = [(await step.enqueue(name)).id for name in ("x", "y")]
    wf = Workflow()
    wf.add("a", step.using(expires_at=datetime.now(UTC) - timedelta(seconds=1)).bind(name="a"))
    wf.add("b", step.bind(name="b"), after=["a"])
    steps = await wf.enqueue()
    conn = await asyncpg.connect(plain(database_url))
    try:
        claimed = await Queries.claim(conn, queues, 10, str(uuid.uuid4()))
        # the plain form claimed x and y and passed over a; the second claim ended it
        assert {j.id: j.state for j in claimed} == {
            before[0]: JobState.RUNNING,
            before[1]: JobState.RUNNING,
            steps["a"].id: JobState.CANCELLED,
        }
        assert await _forms(conn) == {form, "claim_completing"}
    finally:
        await conn.close()
    rows = await fetch(
        database_url, "SELECT state, attempt, errors FROM akadze_jobs WHERE id = $1", steps["b"].id
    )
    assert (rows[0]["state"], rows[0]["attempt"]) == ("cancelled", 0)
    assert "step 'a' ended cancelled" in rows[0]["errors"]


async def test_outcomes_of_which_one_is_a_step_are_written_with_the_settle_step(
    app: Akadze, database_url: str
) -> None:
    @app.task("forms.step")
    async def step(name: str) -> None:
        pass

    wf = Workflow()
    wf.add("a", step.bind(name="a"))
    wf.add("b", step.bind(name="b"), after=["a"])
    steps = await wf.enqueue()
    other = await step.enqueue("x")
    conn = await asyncpg.connect(plain(database_url))
    try:
        claimed = await Queries.claim(conn, ["default"], 10, str(uuid.uuid4()))
        done = Transition(JobState.SUCCEEDED, 1, None, cancellable=True, verdict=Verdict.SUCCEEDED)
        ended = [Completion(j.id, j.run, done, None, plain=j.workflow_id is None) for j in claimed]
        assert sorted(j.id for j in claimed) == [steps["a"].id, other.id]
        written, settled = await Queries.complete_batch(conn, ended)
        assert len(written) == 2
        assert [(s.id, s.state) for s in settled] == [(steps["b"].id, JobState.QUEUED)]
        assert await _forms(conn) == {"claim_completing_plain", "claim_completing"}
    finally:
        await conn.close()
