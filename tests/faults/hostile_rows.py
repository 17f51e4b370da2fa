"""Hostile rows: jobs written with SQL, as a producer in another language could, that no worker
can run; next to ordinary jobs and the jobs of a SIGKILLed worker.

Each hostile row must end failed with a clear error that names the job and never its value,
without stopping a claim, a rescue pass or a completion batch; the ordinary jobs must all
succeed and the lost worker's jobs must be rescued and succeed.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

import asyncpg

from . import checker
from .scenarios import Env, drain, fetch, fetchval, producer_for, registered, stop_fleet, wait_for
from .supervisor import Supervisor, WorkerSpec

#: a value that must never appear in a stored error or a log
CANARY = "SECRET-hostile-canary"


def _deep(depth: int, leaf: str = f'"{CANARY}"') -> str:
    return "[" * depth + leaf + "]" * depth


#: name -> (task, args as JSON text, max_attempts, what its own errors must say)
HOSTILE: dict[str, tuple[str, str, int, tuple[str, ...]]] = {
    "deep-5000": (
        "fault.strict",
        '{"key": "hostile-deep-5000", "n": ' + _deep(5000) + "}",
        3,
        ("UndecodableJobError", "deeper than the limit of 100"),
    ),
    "deep-150": (
        "fault.strict",
        '{"key": "hostile-deep-150", "n": ' + _deep(150) + "}",
        3,
        ("UndecodableJobError", "deeper than the limit of 100"),
    ),
    "string": (
        "fault.strict",
        json.dumps(CANARY),
        3,
        ("UndecodableJobError", "a JSON string, not an object"),
    ),
    "array": (
        "fault.strict",
        json.dumps([CANARY, 1]),
        3,
        ("UndecodableJobError", "a JSON array, not an object"),
    ),
    "wrong-shape": (
        "fault.strict",
        json.dumps({"key": "hostile-wrong-shape", "n": {"v": CANARY}}),
        2,
        ("ArgsRefusedError", "task 'fault.strict'", "n"),
    ),
    "unknown-task": (
        "hostile.nobody",
        json.dumps({"key": "hostile-unknown-task"}),
        2,
        ("UnknownTaskError", "hostile.nobody"),
    ),
    "unknown-task-deep": (
        "hostile.nobody",
        '{"key": "hostile-unknown-task-deep", "n": ' + _deep(5000) + "}",
        2,
        ("UndecodableJobError", "deeper than the limit of 100"),
    ),
}

#: rows left running by a worker that is gone, with hostile arguments and results:
#: name -> (args, result, max_attempts, expected errors)
ORPHANS: dict[str, tuple[str, str, int, tuple[str, ...]]] = {
    # its budget is spent: the rescue fails it
    "orphan-deep-huge-result": (
        '{"key": "hostile-orphan-deep", "n": ' + _deep(5000) + "}",
        # about 24 MB, and nested 5,000 deep
        json.dumps({"blob": "x" * 24_000_000, "deep": "(below)"})[:-1] + ', "nest": ' + _deep(5000) + "}",
        1,
        ("akadze.WorkerLost",),
    ),
    # budget left: rescued to queued, then the claim fails it as undecodable
    "orphan-deep-retried": (
        '{"key": "hostile-orphan-retried", "n": ' + _deep(5000) + "}",
        _deep(5000),
        3,
        ("akadze.WorkerLost", "UndecodableJobError"),
    ),
}


async def _insert_hostile(dsn: str, lost_worker: str) -> dict[str, int]:
    ids: dict[str, int] = {}
    conn = await asyncpg.connect(dsn)
    try:
        for name, (task, args, budget, _words) in HOSTILE.items():
            ids[name] = await conn.fetchval(
                "INSERT INTO akadze_jobs (task, queue, args, max_attempts) "
                "VALUES ($1, 'faults', CAST($2 AS jsonb), $3) RETURNING id",
                task,
                args,
                budget,
            )
        # errors that are not akadze's entries (not even an array) on a job that fails
        await conn.execute(
            'UPDATE akadze_jobs SET errors = \'{"not": "an array"}\' WHERE id = $1', ids["wrong-shape"]
        )
        for name, (args, result, budget, _words) in ORPHANS.items():
            job_id = await conn.fetchval(
                "INSERT INTO akadze_jobs (task, queue, args, max_attempts, result) "
                "VALUES ('fault.strict', 'faults', CAST($1 AS jsonb), $2, CAST($3 AS jsonb)) RETURNING id",
                args,
                budget,
                result,
            )
            # claimed by a worker that no longer exists (a legal queued -> running change)
            await conn.execute(
                "UPDATE akadze_jobs SET state = 'running', run = run + 1, attempt = attempt + 1, "
                "worker_id = CAST($2 AS uuid), started_at = now() WHERE id = $1",
                job_id,
                lost_worker,
            )
            ids[name] = job_id
    finally:
        await conn.close()
    return ids


async def hostile_rows(
    env: Env, *, normal: int = 200, lost_after: float = 2.0, slots: int = 4
) -> checker.Figures:
    started = time.monotonic()
    rng = random.Random()
    spec = WorkerSpec(env.url, env.dsn, slots=slots, lost_after=lost_after)
    victim = Supervisor(spec, 1, env.folder / "logs" / "victim", fault_dsn=env.dsn)
    fleet = Supervisor(spec, 2, env.folder / "logs" / "fleet", fault_dsn=env.dsn)
    producer, producer_app = producer_for(env.url, env.dsn)
    extra: dict[str, Any] = {}
    ids: dict[str, int] = {}
    try:
        # the victim claims long jobs and is SIGKILLed while it runs them
        victims = [{"key": f"victim-{i}", "ms": 10, "first_ms": 60_000} for i in range(slots)]
        await producer.enqueue("fault.work", victims)
        victim.start()

        async def victims_started() -> bool:
            return int(await fetchval(env.dsn, "SELECT count(DISTINCT job_id) FROM chk_exec")) >= slots

        extra["victim ran its jobs"] = await wait_for(victims_started, 60)
        lost_worker = str(await fetchval(env.dsn, "SELECT id FROM akadze_workers LIMIT 1"))
        await victim.kill(victim.workers[0])
        ids = await _insert_hostile(env.dsn, lost_worker)
        for name in (*HOSTILE, *ORPHANS):
            key = _key(name)
            if key is not None:
                producer.log.append(checker.EnqueueRecord(key, "ok", ids[name]))
        await producer.enqueue(
            "fault.work", [{"key": f"normal-{i}", "ms": rng.randint(5, 50)} for i in range(normal // 2)]
        )
        fleet.start()
        await registered(env.dsn, 2)
        await producer.enqueue(
            "fault.work",
            [{"key": f"normal-{i}", "ms": rng.randint(5, 50)} for i in range(normal // 2, normal)],
        )
        extra["drain s"] = round(await drain(env.dsn, 120), 1)
        extra |= await stop_fleet(fleet)
        logs = fleet.logs()
        extra["rescue passes failed"] = logs.count("rescue pass failed")
        extra["worker tracebacks"] = logs.count("Traceback")
        extra["canary in logs"] = CANARY in logs
        rows = await fetch(
            env.dsn,
            "SELECT id, state, attempt, max_attempts, errors::text AS errors, "
            "(SELECT count(*) FROM chk_transition t "
            " WHERE t.job_id = j.id AND t.new_state = 'running' AND t.old_state = 'queued') AS claims "
            "FROM akadze_jobs j WHERE id = ANY($1::bigint[])",
            list(ids.values()),
        )
        by_id = {row["id"]: row for row in rows}
        hostile: dict[str, Any] = {}
        for name, job_id in ids.items():
            row = by_id[job_id]
            errors = json.loads(row["errors"])
            hostile[name] = {
                "id": job_id,
                "state": row["state"],
                "attempt": row["attempt"],
                "claims": row["claims"],
                "errors": [f"{e['type']}: {e['message']}" for e in errors if isinstance(e, dict)],
            }
        extra["normal succeeded"] = f"{await _succeeded(env.dsn, 'normal-%')}/{normal}"
        extra["victims rescued and succeeded"] = f"{await _rescued_ok(env.dsn)}/{slots}"
        extra["hostile (state claims: error types)"] = "; ".join(
            f"{name} {row['state']} {row['claims']}: "
            + ",".join(sorted({e.split(":", 1)[0].rsplit(".", 1)[-1] for e in row["errors"]}))
            for name, row in hostile.items()
        )
    finally:
        await victim.stop()
        await fleet.stop()
        await producer_app.dispose()
    fig = await checker.check(
        env.dsn, "hostile rows", produced=producer.log, seconds=time.monotonic() - started
    )
    fig.details["hostile"] = hostile
    fig.extra = extra
    expected = {name: spec[-1] for name, spec in (*HOSTILE.items(), *ORPHANS.items())}
    for name, words in expected.items():
        row = hostile.get(name, {})
        text = " | ".join(row.get("errors", []))
        fig.require(row.get("state") == "failed", f"{name} ended failed")
        fig.require(all(word in text for word in words), f"{name} fails with its own clear error ({words})")
        if "UndecodableJobError" in words:
            fig.require(f"job {row.get('id')}" in text, f"{name}'s error names the job")
            fig.require(row.get("claims") == (2 if name.startswith("orphan") else 1), f"{name}: no retry")
    fig.require(CANARY not in str(hostile), "no argument or result value in a stored error")
    fig.require(not extra.get("canary in logs"), "no argument or result value in a log")
    fig.require(extra.get("normal succeeded") == f"{normal}/{normal}", "every ordinary job succeeded")
    fig.require(
        extra.get("victims rescued and succeeded") == f"{slots}/{slots}", "the lost worker's jobs rescued"
    )
    fig.require(extra.get("rescue passes failed") == 0, "no rescue pass failed")
    fig.require(extra.get("worker tracebacks") == 0, "no traceback")
    return fig


def _key(name: str) -> str | None:
    if name in ("string", "array"):
        return None
    args = HOSTILE[name][1] if name in HOSTILE else ORPHANS[name][0]
    start = args.index('"key": "') + len('"key": "')
    return args[start : args.index('"', start)]


async def _succeeded(dsn: str, pattern: str) -> int:
    return int(
        await fetchval(
            dsn,
            "SELECT count(*) FROM akadze_jobs WHERE args ->> 'key' LIKE $1 AND state = 'succeeded'",
            pattern,
        )
    )


async def _rescued_ok(dsn: str) -> int:
    return int(
        await fetchval(
            dsn,
            "SELECT count(*) FROM akadze_jobs WHERE args ->> 'key' LIKE 'victim-%' AND state = 'succeeded' "
            'AND errors @> \'[{"type": "akadze.WorkerLost"}]\'',
        )
    )
