"""Nesting depth (issue 12): enqueue refuses arguments a worker could not decode, naming the
task and the limit; arguments at the limit run; deeper results are not JSON for akadze; stored
rows that cannot be decoded become UnreadableArgs instead of an exception."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from akadze import Akadze, JobState
from akadze.codec import encode_result
from akadze.codec.stored import MAX_JSON_DEPTH, UnreadableArgs, decode_stored_args
from akadze.db.queries import Queries
from akadze.errors import ArgsTooDeepError, ResultNotJson
from akadze.testing import drain


def nested(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


async def count_jobs(app: Akadze) -> int:
    async with app.engine.connect() as conn:
        return int((await conn.execute(text("SELECT count(*) FROM akadze_jobs"))).scalar_one())


async def test_arguments_at_the_limit_are_stored_and_decoded_by_the_worker(app: Akadze) -> None:
    seen: list[int] = []

    @app.task("deep.ok")
    async def deep_ok(tree: Any) -> None:
        depth = 1
        while isinstance(tree, list):
            tree, depth = tree[0], depth + 1
        seen.append(depth)

    # the arguments object is one level; the tree fills the rest of the limit
    job = await deep_ok.enqueue(tree=nested(MAX_JSON_DEPTH - 1))
    assert await drain(app) == 1
    after = await app.get_job(job.id)
    assert after is not None and after.state is JobState.SUCCEEDED, after.errors
    assert seen == [MAX_JSON_DEPTH]


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH, 980, 1000, 5000])
async def test_deeper_arguments_are_refused_at_enqueue_naming_the_task_and_the_limit(
    app: Akadze, levels: int
) -> None:
    @app.task("deep.refused")
    async def deep_refused(tree: Any) -> None:
        pass

    with pytest.raises(ArgsTooDeepError) as caught:
        await deep_refused.enqueue(tree=nested(levels))
    assert "'deep.refused'" in str(caught.value) and f"limit of {MAX_JSON_DEPTH} levels" in str(caught.value)
    assert "leaf" not in str(caught.value)
    assert isinstance(caught.value, ValueError)
    with pytest.raises(ArgsTooDeepError):
        await deep_refused.enqueue_many([{"tree": nested(levels)}])
    assert await count_jobs(app) == 0


def test_brackets_inside_strings_do_not_count() -> None:
    assert encode_result({"text": "[" * 5000}) is not None
    assert decode_stored_args('{"text": "' + "[{" * 5000 + '"}') == {"text": "[{" * 5000}


def test_a_result_nested_deeper_than_the_limit_is_not_json() -> None:
    assert encode_result(nested(MAX_JSON_DEPTH)) is not None
    with pytest.raises(ResultNotJson, match=f"deeper than {MAX_JSON_DEPTH} levels"):
        encode_result(nested(MAX_JSON_DEPTH + 1))
    with pytest.raises(ResultNotJson):
        encode_result(nested(5000))


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ('{"a": ' + "[" * 5000 + "]" * 5000 + "}", "deeper than the limit of 100 levels"),
        ('{"a": ' + "[" * 150 + "]" * 150 + "}", "deeper than the limit of 100 levels"),
        ('"SECRET"', "a JSON string, not an object"),
        ("[1, 2]", "a JSON array, not an object"),
        ("12", "a JSON number, not an object"),
        ("null", "a JSON null, not an object"),
    ],
)
def test_stored_arguments_that_cannot_be_decoded_say_why_without_the_value(raw: str, reason: str) -> None:
    args = decode_stored_args(raw)
    assert isinstance(args, UnreadableArgs) and args == {}
    assert reason in args.reason and "SECRET" not in args.reason


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH, 5000])
def test_a_generated_client_refuses_deeper_arguments_too(levels: int) -> None:
    from typing_extensions import TypedDict

    from akadze.client import RemoteTask

    class TreeArgs(TypedDict):
        tree: Any

    task: RemoteTask[Any] = RemoteTask(
        "deep.remote", queue="default", priority=0, max_attempts=3, args_fp="x", args_type=TreeArgs
    )
    assert task._encode({"tree": nested(MAX_JSON_DEPTH - 1)})
    with pytest.raises(ArgsTooDeepError, match=f"'deep.remote'.*limit of {MAX_JSON_DEPTH} levels"):
        task._encode({"tree": nested(levels)})


async def test_a_stored_row_that_cannot_be_decoded_is_still_read_and_listed(app: Akadze) -> None:
    deep = '{"a": ' + "[" * 5000 + "]" * 5000 + "}"
    async with app.engine.connect() as conn:
        inserted = await conn.execute(
            text(
                "INSERT INTO akadze_jobs (task, queue, args, result) "
                "VALUES ('foreign', 'q', CAST(:args AS jsonb), CAST(:args AS jsonb)) RETURNING id"
            ),
            {"args": deep},
        )
        job_id = inserted.scalar_one()
        await conn.commit()
        listed = await Queries.list_jobs(conn)
    job = await app.get_job(job_id)
    assert job is not None and isinstance(job.args, UnreadableArgs) and job.result is None
    assert "deeper than the limit" in job.args.reason
    assert [j.id for j in listed] == [job_id] and isinstance(listed[0].args, UnreadableArgs)


async def test_a_row_that_cannot_be_decoded_can_still_be_cancelled_and_requeued(app: Akadze) -> None:
    """request_cancel and requeue read the JSON columns as text too (the CLI's cancel and
    requeue raised RecursionError on a 5,000-deep row)."""
    deep = '{"a": ' + "[" * 5000 + "]" * 5000 + "}"
    async with app.engine.connect() as conn:
        inserted = await conn.execute(
            text(
                "INSERT INTO akadze_jobs (task, queue, state, args, finished_at) VALUES"
                " ('foreign', 'q', 'queued', CAST(:args AS jsonb), NULL),"
                " ('foreign', 'q', 'failed', CAST(:args AS jsonb), now()) RETURNING id"
            ),
            {"args": deep},
        )
        queued_id, failed_id = inserted.scalars().all()
        cancelled = await Queries.request_cancel(conn, queued_id)
        requeued = await Queries.requeue(conn, failed_id)
        await conn.commit()
    assert cancelled is not None and cancelled[0].state is JobState.CANCELLED
    assert isinstance(cancelled[0].args, UnreadableArgs)
    assert requeued is not None and requeued[0].state is JobState.QUEUED
    assert isinstance(requeued[0].args, UnreadableArgs)
