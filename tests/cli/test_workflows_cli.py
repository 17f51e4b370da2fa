"""`akadze workflows show` and `workflows cancel`, and `jobs explain` naming the steps a waiting
step waits for, against a real database (issue 29, point 5)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy.engine import make_url
from typer.testing import CliRunner, Result

from akadze import Akadze, Job, Workflow
from akadze.cli import app as cli
from akadze.control.explain import WAITED_NAMED, explain
from akadze.db.graph import WaitedStep, Waits
from akadze.job import JobState
from akadze.testing import drain
from tests.conftest import _admin, with_database
from tests.support import execute, fetch


def build(app: Akadze) -> None:
    # the first step in a queue of its own: draining it runs the first step alone
    @app.task("order.charge", queue="first")
    async def charge(order_id: int) -> int:
        return order_id

    for name in ("ship", "mail", "close"):

        @app.task(f"order.{name}", queue="after")
        async def step(order_id: int) -> None:
            return None


async def diamond(app: Akadze, name: str | None = "order 42") -> dict[str, Job]:
    """charge, then ship and mail, then close (once both have succeeded)."""
    task = app.get_task
    wf = Workflow(name=name)
    wf.add("charge", task("order.charge").bind(order_id=42))
    wf.add("ship", task("order.ship").bind(order_id=42), after=["charge"])
    wf.add("mail", task("order.mail").bind(order_id=42), after=["charge"])
    wf.add("close", task("order.close").bind(order_id=42), after=["ship", "mail"])
    return await wf.enqueue()


def charged(database_url: str) -> dict[str, Job]:
    """The diamond once charge has succeeded: ship and mail ready, close waiting for both."""

    async def go() -> dict[str, Job]:
        async with Akadze(database_url=database_url) as app:
            build(app)
            steps = await diamond(app)
            await drain(app, queues=["first"])
            return steps

    return asyncio.run(go())


@pytest.fixture
def akadze(database_url: str) -> Iterator[Callable[..., Result]]:
    runner = CliRunner()

    def invoke(*args: str, **env: str) -> Result:
        base = {"AKADZE_DATABASE_URL": database_url, "AKADZE_APP": "", **env}
        return runner.invoke(cli, list(args), env=base)

    yield invoke


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# -- workflows show ----------------------------------------------------------------------------


def test_show_prints_the_steps_level_by_level_with_what_each_waits_for(
    database_url: str, akadze: Callable[..., Result]
) -> None:
    steps = charged(database_url)
    workflow_id = steps["charge"].workflow_id
    result = akadze("workflows", "show", str(workflow_id))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"workflow {workflow_id} 'order 42', created ")
    assert lines[0].endswith(": 4 steps: 1 waiting, 2 queued, 1 succeeded")
    assert lines[1].split() == [
        "LEVEL",
        "STEP",
        "ID",
        "TASK",
        "STATE",
        "ATTEMPT",
        "AFTER",
        "FINISHED",
        "AT",
        "ERROR",
    ]
    rows = [line.split() for line in lines[2:]]
    assert [row[:5] for row in rows] == [
        ["0", "charge", str(steps["charge"].id), "order.charge", "succeeded"],
        ["1", "ship", str(steps["ship"].id), "order.ship", "queued"],
        ["1", "mail", str(steps["mail"].id), "order.mail", "queued"],
        ["2", "close", str(steps["close"].id), "order.close", "waiting", "(2)"][:5],
    ]
    assert rows[3][5] == "(2)" and rows[3][7] == "ship,mail"
    assert rows[1][6] == "charge" and rows[0][6] == "-"
    # `jobs show` of a step names its workflow and step; of a lone job, none
    shown = akadze("jobs", "show", str(steps["ship"].id)).stdout.splitlines()
    assert f"workflow         {workflow_id} (step ship)" in shown


def test_show_output_json_is_one_document_with_every_step(
    database_url: str, akadze: Callable[..., Result]
) -> None:
    steps = charged(database_url)
    workflow_id = steps["charge"].workflow_id
    document = as_json(akadze("workflows", "show", str(workflow_id), "--output", "json"))
    assert (document["id"], document["name"]) == (workflow_id, "order 42")
    assert document["counts"] == {"waiting": 1, "queued": 2, "succeeded": 1}
    by_step = {step["step"]: step for step in document["steps"]}
    assert list(by_step) == ["charge", "ship", "mail", "close"]  # parents first
    close = by_step["close"]
    assert (close["id"], close["state"], close["waiting"], close["deps_left"]) == (
        steps["close"].id,
        "queued",
        True,
        2,
    )
    assert (close["after"], close["after_ids"], close["level"]) == (
        ["ship", "mail"],
        [steps["ship"].id, steps["mail"].id],
        2,
    )
    assert by_step["charge"]["state"] == "succeeded" and by_step["charge"]["after"] == []
    assert "args" not in close and "result" not in by_step["charge"]  # never arguments or results


def test_show_of_a_missing_workflow_exits_1_and_a_bad_id_exits_2(akadze: Callable[..., Result]) -> None:
    missing = akadze("workflows", "show", "999999")
    assert (missing.exit_code, missing.stdout, missing.stderr.strip()) == (
        1,
        "",
        "workflow 999999 does not exist",
    )
    for bad, said in (
        ("abc", "workflow id 'abc' is not a number"),
        ("0", "workflow id 0 is out of range"),
        ("99999999999999999999", "is out of range: workflow ids run from 1 to"),
    ):
        result = akadze("workflows", "show", bad)
        assert result.exit_code == 2, result.output
        assert said in result.stderr and len(result.stderr.strip().splitlines()) == 1
    second = akadze("workflows", "show", "1", "tests.apps.basic:app")
    assert second.exit_code == 2 and "--app" in second.stderr


@pytest.fixture
def other_database_url(server_url: str, template_db: str, database_url: str) -> Iterator[str]:
    """A second migrated database: a stand-in replica that lags (it has none of the primary's rows)."""
    name = f"{make_url(database_url).database}_replica"
    asyncio.run(_admin(server_url, f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"'))
    yield with_database(server_url, name)
    asyncio.run(_admin(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def test_show_reads_from_the_read_database_and_cancel_acts_on_the_primary(
    database_url: str, other_database_url: str, akadze: Callable[..., Result]
) -> None:
    steps = charged(database_url)
    workflow_id = str(steps["charge"].workflow_id)
    urls = ("--database-url", database_url, "--read-database-url", other_database_url)
    shown = akadze("workflows", "show", workflow_id, *urls)
    assert (shown.exit_code, shown.stderr.strip()) == (1, f"workflow {workflow_id} does not exist")
    from_env = akadze("workflows", "show", workflow_id, AKADZE_READ_DATABASE_URL=other_database_url)
    assert from_env.exit_code == 1
    cancelled = akadze("workflows", "cancel", workflow_id, "--database-url", database_url)
    assert cancelled.exit_code == 0, cancelled.output


# -- workflows cancel --------------------------------------------------------------------------


def test_cancel_ends_every_unfinished_step_and_asks_a_running_one_to_stop(
    database_url: str, akadze: Callable[..., Result]
) -> None:
    steps = charged(database_url)
    workflow_id = str(steps["charge"].workflow_id)
    # ship is running (a worker took it): the state no API call makes without a live worker
    asyncio.run(
        execute(
            database_url,
            "UPDATE akadze_jobs SET state = 'running', attempt = 1, run = 1, started_at = now() "
            f"WHERE id = {steps['ship'].id}",
        )
    )
    result = akadze("workflows", "cancel", workflow_id)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == (
        f"workflow {workflow_id}: 2 steps cancelled, 1 running step asked to stop "
        "(each ends cancelled unless it finishes first)"
    )
    rows = asyncio.run(
        fetch(
            database_url,
            "SELECT step, state, cancel_requested FROM akadze_jobs WHERE workflow_id = $1 ORDER BY id",
            int(workflow_id),
        )
    )
    assert [tuple(row) for row in rows] == [
        ("charge", "succeeded", False),
        ("ship", "running", True),
        ("mail", "cancelled", True),
        ("close", "cancelled", True),
    ]
    # every step finished: nothing to cancel, exit 1
    asyncio.run(
        execute(
            database_url,
            f"UPDATE akadze_jobs SET state = 'succeeded', finished_at = now() WHERE id = {steps['ship'].id}",
        )
    )
    again = akadze("workflows", "cancel", workflow_id)
    assert (again.exit_code, again.stderr.strip()) == (
        1,
        f"workflow {workflow_id} has no unfinished step: nothing to cancel",
    )
    missing = akadze("workflows", "cancel", "999999")
    assert (missing.exit_code, missing.stderr.strip()) == (1, "workflow 999999 does not exist")


# -- jobs explain ------------------------------------------------------------------------------


def test_explain_names_the_steps_a_waiting_step_waits_for_with_and_without_the_app(
    database_url: str, akadze: Callable[..., Result]
) -> None:
    async def go() -> dict[str, Job]:
        from tests.apps.basic import create_app

        async with create_app(database_url) as app:
            record = app.get_task("basic.record")
            wf = Workflow()
            wf.add("first", record.bind(label="a"))
            wf.add("second", record.bind(label="b"))
            wf.add("last", record.bind(label="c"), after=["first", "second"], after_failure="run")
            return await wf.enqueue()

    steps = asyncio.run(go())
    last, workflow_id = steps["last"], steps["last"].workflow_id
    said = (
        f"waits for 2 steps of workflow {workflow_id}: 'first' (job {steps['first'].id}, queued), "
        f"'second' (job {steps['second'].id}, queued); it is released once they have finished, "
        f"whatever their end (see `akadze workflows show {workflow_id}`)"
    )
    for how in ((), ("--app", "tests.apps.basic:from_environment")):
        result = akadze(
            "jobs", "explain", str(last.id), "--output", "json", *how, BASIC_APP_DATABASE_URL=database_url
        )
        document = as_json(result)
        assert document["reasons"][0] == {"code": "waiting_for_steps", "message": said}, how
        assert "ready" not in [reason["code"] for reason in document["reasons"]]
    # the first step is not a waiting one: ready, as any job
    first = as_json(akadze("jobs", "explain", str(steps["first"].id), "--output", "json"))
    assert "waiting_for_steps" not in [reason["code"] for reason in first["reasons"]]
    text = akadze("jobs", "explain", str(last.id))
    assert text.exit_code == 0 and f"  - {said}" in text.stdout.splitlines()


def test_explain_names_the_first_few_of_many_parents_and_counts_the_rest() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    job = Job(
        id=9000,
        task="album.build",
        queue="default",
        state=JobState.QUEUED,
        priority=0,
        args={},
        attempt=0,
        max_attempts=3,
        run=0,
        run_at=now,
        expires_at=None,
        cancel_requested=False,
        errors=(),
        result=None,
        worker_id=None,
        args_fp=None,
        created_at=now,
        started_at=None,
        finished_at=None,
    )
    parents = tuple(WaitedStep(n, f"resize-{n}", JobState.RUNNING) for n in range(1, WAITED_NAMED + 1))
    waits = Waits(workflow_id=3, deps_left=10_000, after_failure="cancel", steps=parents, unfinished=10_000)
    found = explain(job, now=now, paused_at=None, live=[], workers=[], waits=waits)
    message = found.reasons[0].message
    assert found.reasons[0].code == "waiting_for_steps"
    assert message.startswith("waits for 10,000 steps of workflow 3: 'resize-1' (job 1, running), ")
    last = f"'resize-{WAITED_NAMED}' (job {WAITED_NAMED}, running)"
    assert f"{last} and 9,990 more; it is released once they have succeeded" in message
