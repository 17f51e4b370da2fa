"""A TypeScript client parks a limited task's jobs due now by their enqueue, as the Python client
does (issue 32, docs/flow-control.md "Parked at enqueue"): the same rows, the group the claim
computes in ``limit_grp``, one arrival row per group, and the limited claim takes them."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from akadze import Limit, client as akadze_client
from tests.codegen.ts_node import Harness, both_clients, libpq_url
from tests.support import execute, fetch
from tests.test_limit_parking import claim

APP = "tests.apps.flow:app"
JOBS = (
    "SELECT task, queue, priority, args::text AS args, parked, limit_grp, state FROM akadze_jobs ORDER BY id"
)
ARRIVALS = (
    "SELECT queue, task, grp, count(*) AS n FROM akadze_limit_arrivals GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
)

#: (op, task, arguments, delay in ms or None): the same calls from Python and from Node
CALLS: list[tuple[str, str, Any, int | None]] = [
    ("enqueue", "flow.per_key", {"account": "a-1", "n": 1}, None),
    ("enqueue", "flow.two", {"n": 2}, None),
    ("enqueue", "flow.fair", {"tenant": "t", "n": 3}, 0),
    ("enqueue", "flow.per_key", {"account": "a-1", "n": 4}, 60_000),
    ("enqueue", "flow.free", {"n": 5}, None),
    (
        "enqueueMany",
        "flow.per_key",
        [{"account": "a-1", "n": 6}, {"account": "a-2", "n": 7}, {"account": "a-1", "n": 8}],
        None,
    ),
    ("enqueueMany", "flow.two", [{"n": 9}, {"n": 10}], None),
    ("enqueueMany", "flow.two", [{"n": 11}], 60_000),
]


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Any]]:
    """(the built TypeScript package's dist, the Python client package) of the flow app."""
    yield from both_clients(APP, tmp_path_factory.mktemp("clients"), "flowclients", "pyclients_ts_limit")


async def _python_calls(database_url: str, module: Any) -> None:
    tasks = {t.name: t for t in vars(module).values() if isinstance(t, akadze_client.RemoteTask)}
    akadze_client.configure(database_url=database_url)
    try:
        for op, name, args, delay in CALLS:
            task = tasks[name] if delay is None else tasks[name].using(delay=timedelta(milliseconds=delay))
            if op == "enqueue":
                await task._enqueue(args)
            else:
                await task.enqueue_many(args)
    finally:
        await akadze_client.dispose()


def _node_calls(harness: Harness) -> None:
    for op, name, args, delay in CALLS:
        options = {} if delay is None else {"delay": delay}
        key = "args" if op == "enqueue" else "items"
        answer = harness.ask({"op": op, "task": name, key: args, "options": options})
        assert answer["ok"], answer


async def _state(database_url: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    jobs = [tuple(r) for r in await fetch(database_url, JOBS)]
    arrivals = [tuple(r) for r in await fetch(database_url, ARRIVALS)]
    return jobs, arrivals


async def test_node_parks_a_limited_tasks_jobs_due_now_as_the_python_client_does(
    database_url: str, packages: tuple[Path, Any]
) -> None:
    dist, module = packages
    await _python_calls(database_url, module)
    python = await _state(database_url)
    await execute(database_url, "DELETE FROM akadze_jobs; DELETE FROM akadze_limit_arrivals")
    harness = Harness(dist, libpq_url(database_url))
    try:
        _node_calls(harness)
    finally:
        harness.close()
    node = await _state(database_url)
    assert node == python
    jobs, arrivals = node
    assert [(task, parked, grp) for task, _, _, _, parked, grp, _ in jobs] == [
        ("flow.per_key", "limit", '["flow.per_key", "a-1"]'),
        ("flow.two", "limit", '["flow.two", null]'),
        ("flow.fair", "limit", '["flow.fair", "t"]'),  # a delay of 0 is due now
        ("flow.per_key", None, None),  # delayed: the claim index, as before
        ("flow.free", None, None),  # no Limit
        ("flow.per_key", "limit", '["flow.per_key", "a-1"]'),
        ("flow.per_key", "limit", '["flow.per_key", "a-2"]'),
        ("flow.per_key", "limit", '["flow.per_key", "a-1"]'),
        ("flow.two", "limit", '["flow.two", null]'),
        ("flow.two", "limit", '["flow.two", null]'),
        ("flow.two", None, None),
    ]
    # one arrival row per enqueue, and one per group of an enqueueMany
    assert arrivals == [
        ("flow", "flow.fair", '["flow.fair", "t"]', 1),
        ("flow", "flow.per_key", '["flow.per_key", "a-1"]', 2),
        ("flow", "flow.per_key", '["flow.per_key", "a-2"]', 1),
        ("flow", "flow.two", '["flow.two", null]', 2),
    ]


async def test_the_limited_claim_takes_the_jobs_node_parked(
    database_url: str, packages: tuple[Path, Any]
) -> None:
    dist, _ = packages
    items = [{"account": account, "n": n} for n, account in enumerate(["a-1", "a-2", "a-1"])]
    harness = Harness(dist, libpq_url(database_url))
    try:
        answer = harness.ask({"op": "enqueueMany", "task": "flow.per_key", "items": items})
    finally:
        harness.close()
    assert answer["ok"], answer
    arrivals = [
        tuple(r) for r in await fetch(database_url, "SELECT grp FROM akadze_limit_arrivals ORDER BY grp")
    ]
    assert arrivals == [('["flow.per_key", "a-1"]',), ('["flow.per_key", "a-2"]',)]
    jobs, _ = await claim(
        database_url, {"flow.per_key": Limit(concurrency=1, key="account")}, queues=("flow",)
    )
    # one job of each account's group (concurrency 1), the first enqueued
    assert sorted((job.args["account"], job.args["n"]) for job in jobs) == [("a-1", 0), ("a-2", 1)]
    assert await fetch(database_url, "SELECT grp FROM akadze_limit_arrivals") == []
