"""Hostile task names, queue names, schedule names and argument values: each is stored and used
verbatim or refused with a clear error at registration or enqueue; none is ever run as SQL."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import asyncpg
import pydantic
import pytest

from akadze import Akadze
from akadze.errors import ArgsTooLargeError, ConfigError
from akadze.testing import drain
from akadze.worker import Worker
from akadze.worker.scheduler import fire_due_schedules

from .scenarios import Env, fetch, fetchval, wait_for

SAME_63 = "q" * 63
NAMES = [
    "x'; DROP TABLE akadze_jobs; --",
    "'); DELETE FROM akadze_jobs; SELECT ('",
    '"',
    "\\",
    "$$",
    "$1",
    "%s",
    "default",
    "select",
    "a\nb",
    "tab\there",
    "\u202eevil\u200b",
    "naïve-名前-🚀",
    SAME_63 + "A",
    SAME_63 + "B",
]
#: names refused at registration, and a word their error must contain
REFUSED = {"": "non-empty", " ": "non-empty", "a\x00b": "NUL", "x" * 10_000: "limit"}

VALUES = [
    "x'; DROP TABLE akadze_jobs; --",
    "\\'\\\"\\\\",
    "$$ LANGUAGE sql $$",
    '{"looks": "like json"}',
    "\u202e\u200b\ufeff zero-width and RTL",
    "emoji 🚀 and CJK 名前",
    "\U0010ffff last code point",
    "l" * 200_000,
]


async def schema_fingerprint(dsn: str) -> str:
    """Tables, columns, functions and triggers of the database, hashed."""
    return await fetchval(
        dsn,
        "SELECT md5(string_agg(x, ',' ORDER BY x)) FROM ("
        " SELECT c.relname || '.' || a.attname || ':' || a.atttypid::text AS x"
        " FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = 'public' AND a.attnum > 0 AND NOT a.attisdropped"
        " UNION ALL SELECT 'fn ' || proname || md5(prosrc) FROM pg_proc p"
        " JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public'"
        " UNION ALL SELECT 'tg ' || tgname FROM pg_trigger WHERE NOT tgisinternal) s",
    )


async def echo(text: str, nested: dict[str, Any]) -> dict[str, Any]:
    return {"text": text, "nested": nested}


def register_hostile(app: Akadze) -> tuple[dict[str, Any], dict[str, str]]:
    """Register a task per hostile task name and per hostile queue name; returns the tasks
    accepted and the errors of the refused names."""
    accepted: dict[str, Any] = {}
    refused: dict[str, str] = {}
    for index, name in enumerate([*NAMES, *REFUSED]):
        try:
            accepted[f"task:{name}"] = app.register(echo, name=name, queue="hostile")
        except ConfigError as exc:
            refused[f"task:{name}"] = str(exc)
        try:
            accepted[f"queue:{name}"] = app.register(echo, name=f"queue-task-{index}", queue=name)
        except ConfigError as exc:
            refused[f"queue:{name}"] = str(exc)
    return accepted, refused


@pytest.mark.timeout(180)
async def test_hostile_names_and_values_are_stored_verbatim_or_refused_clearly(fault_env: Env) -> None:
    dsn = fault_env.dsn
    conn = await asyncpg.connect(dsn)
    await conn.execute(
        "CREATE TABLE chk_sentinel (n int); INSERT INTO chk_sentinel SELECT generate_series(1, 10)"
    )
    await conn.close()
    before = await schema_fingerprint(dsn)

    app = Akadze(database_url=fault_env.url)
    try:
        accepted, refused = register_hostile(app)
        # every refused name is refused as task name and as queue name, with a clear reason
        for name, word in REFUSED.items():
            for kind in ("task", "queue"):
                assert word in refused[f"{kind}:{name}"], refused
                assert len(refused[f"{kind}:{name}"]) < 300, "the message must not echo a huge name"
        assert all(f"task:{name}" in accepted and f"queue:{name}" in accepted for name in NAMES)

        expected: dict[int, tuple[str, str, dict[str, Any]]] = {}
        for index, task in enumerate(accepted.values()):
            args = {
                "text": VALUES[index % len(VALUES)],
                "nested": {"k'ey\"": [VALUES[(index + 1) % len(VALUES)]]},
            }
            job = await task.enqueue(**args)
            expected[job.id] = (task.name, task.queue, args)

        # the two queues that share their first 63 bytes are served apart
        queue_a, queue_b = SAME_63 + "A", SAME_63 + "B"
        runs = await drain(app, queues=[queue_a])
        assert runs == 1
        states = await fetch(
            dsn, "SELECT queue, state FROM akadze_jobs WHERE queue = ANY($1)", [queue_a, queue_b]
        )
        assert {row["queue"]: row["state"] for row in states} == {queue_a: "succeeded", queue_b: "queued"}

        # a listening worker serves the rest (NOTIFY payloads carry the hostile queue names)
        worker = Worker(app, queues=sorted({q for _, q, _ in expected.values()}), slots=8)
        serving = asyncio.create_task(worker.run(handle_signals=False))

        async def all_done() -> bool:
            return not await fetchval(dsn, "SELECT count(*) FROM akadze_jobs WHERE state <> 'succeeded'")

        assert await wait_for(all_done, 60)
        worker.stop()
        await asyncio.wait_for(serving, 30)

        rows = await fetch(
            dsn, "SELECT id, task, queue, args::text AS args, result::text AS result FROM akadze_jobs"
        )
        assert len(rows) == len(expected)
        for row in rows:
            task_name, queue, args = expected[row["id"]]
            assert row["task"] == task_name and row["queue"] == queue
            assert json.loads(row["args"]) == args
            assert json.loads(row["result"]) == args

        # schedule names too
        for name in NAMES[:6]:
            app.schedule(
                name, accepted["task:select"], every=timedelta(seconds=1), args={"text": name, "nested": {}}
            )
        for name in REFUSED:
            with pytest.raises(ConfigError):
                app.schedule(
                    name, accepted["task:select"], every=timedelta(seconds=1), args={"text": "", "nested": {}}
                )
        look = await fire_due_schedules(app)
        assert len(look.fired) == 6
        stored = {row["schedule"] for row in await fetch(dsn, "SELECT schedule FROM akadze_schedule_runs")}
        assert stored == set(NAMES[:6])
    finally:
        await app.dispose()

    assert await schema_fingerprint(dsn) == before
    assert await fetchval(dsn, "SELECT count(*) FROM chk_sentinel") == 10


@pytest.mark.timeout(60)
async def test_unstorable_and_oversized_arguments_are_refused_at_enqueue_and_insert_nothing(
    fault_env: Env,
) -> None:
    app = Akadze(database_url=fault_env.url)
    try:
        task = app.register(echo, name="hostile.echo")
        cases: list[tuple[dict[str, Any], type[Exception], str]] = [
            ({"text": "nul \x00 inside", "nested": {}}, ValueError, "NUL"),
            ({"text": "ok", "nested": {"deep": ["nul \x00"]}}, ValueError, "NUL"),
            ({"text": "lone surrogate \ud800", "nested": {}}, ValueError, "hostile.echo"),
            ({"text": "big" * 400_000, "nested": {}}, ArgsTooLargeError, "over the limit"),
            ({"text": 5, "nested": {}}, pydantic.ValidationError, "text"),
            ({"text": "ok", "nested": {}, "extra": 1}, pydantic.ValidationError, "extra"),
            ({"text": "ok", "nested": {"n": float("nan")}}, ValueError, "NaN"),
        ]
        for args, error, word in cases:
            with pytest.raises(error) as raised:
                await task.enqueue(**args)
            assert word in str(raised.value), str(raised.value)[:300]
            assert len(str(raised.value)) < 2000, "the error must not echo a huge value"
            with pytest.raises(error):
                await task.enqueue_many([{"text": "fine", "nested": {}}, args])
        assert await fetchval(fault_env.dsn, "SELECT count(*) FROM akadze_jobs") == 0
        # just under the limit is stored byte for byte
        big = "é" * 400_000
        job = await task.enqueue(text=big, nested={})
        stored = await fetchval(
            fault_env.dsn, "SELECT args ->> 'text' FROM akadze_jobs WHERE id = $1", job.id
        )
        assert stored == big
    finally:
        await app.dispose()
