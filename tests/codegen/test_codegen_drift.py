"""The argument-schema fingerprint (hard case 39) and what a worker does with a job built
against another schema (case 40), unknown arguments included (the unknown_args policy)."""

from __future__ import annotations

import enum
import json
import logging
from typing import Any, Literal, TypedDict

import pydantic
import pytest
from pydantic import BaseModel, Field

from akadze import Akadze
from akadze.client import RemoteTask
from akadze.codec import build_codec
from akadze.codec.drift import ArgsRefusedError, ArgsSchemaMismatch, DriftLog, check_drift
from akadze.errors import ConfigError
from akadze.task import TaskOptions
from akadze.testing import drain
from tests.codegen.apps.producers.orders import Postcode
from tests.support import fetch


def fp(fn: Any) -> str:
    return build_codec("t", fn).fingerprint


class Address(BaseModel):
    """Docs do not count."""

    street: str
    zip: str = Field(default="1000", description="nor do descriptions")
    title: str = "a field named like a JSON-schema keyword still counts"


class Renamed(BaseModel):
    zip: str = Field(default="9999", description="another description")
    street: str
    title: str = "another default"


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Colour(enum.Enum):
    GREEN = "green"
    RED = "red"


class MoreColors(enum.Enum):
    RED = "red"
    GREEN = "green"
    BLUE = "blue"


class Aliased(BaseModel):
    street: str = Field(alias="Street")
    zip: str = "1000"
    title: str = ""


class WithoutTitle(BaseModel):
    street: str
    zip: str = "1000"


class Node(BaseModel):
    children: list[Node] = []


class Tree(BaseModel):
    children: list[Tree] = []


async def base(a: Address, c: Color, n: int | str, x: int = 1) -> None: ...


class TestFingerprint:
    def test_it_ignores_docs_class_names_defaults_field_order_and_union_order(self) -> None:
        async def same(n: str | int, a: Renamed, c: Colour, x: int = 7) -> None: ...

        assert fp(base) == fp(same)

    def test_it_changes_with_a_wire_name(self) -> None:
        async def changed(a: Aliased, c: Color, n: int | str, x: int = 1) -> None: ...

        assert fp(base) != fp(changed)

    def test_it_changes_with_requiredness(self) -> None:
        async def changed(a: Address, c: Color, n: int | str, x: int) -> None: ...

        assert fp(base) != fp(changed)

    def test_it_changes_with_an_enum_or_literal_value_set(self) -> None:
        async def enum_changed(a: Address, c: MoreColors, n: int | str, x: int = 1) -> None: ...

        async def lit(k: Literal["a", "b"]) -> None: ...

        async def lit_changed(k: Literal["a", "c"]) -> None: ...

        assert fp(base) != fp(enum_changed)
        assert fp(lit) != fp(lit_changed)

    def test_it_changes_with_a_type(self) -> None:
        async def changed(a: Address, c: Color, n: int | str, x: float = 1) -> None: ...

        assert fp(base) != fp(changed)

    def test_a_property_named_title_is_part_of_the_wire_shape(self) -> None:
        async def changed(a: WithoutTitle, c: Color, n: int | str, x: int = 1) -> None: ...

        assert fp(base) != fp(changed)

    def test_recursive_models_fingerprint_by_structure(self) -> None:
        async def one(n: Node) -> None: ...

        async def other(n: Tree) -> None: ...

        assert fp(one) == fp(other)


def validation_error() -> pydantic.ValidationError:
    try:
        pydantic.TypeAdapter(dict[str, int]).validate_python({"user_id": "x"})
    except pydantic.ValidationError as exc:
        return exc
    raise AssertionError("no error")


class TestCheckDrift:
    def test_matching_or_missing_fingerprints_are_not_drift(self) -> None:
        assert check_drift("t", "aaaa", "aaaa", None).run
        assert check_drift("t", "aaaa", None, None).run

    def test_arguments_refused_by_their_own_schema_fail_without_retries_naming_the_field(self) -> None:
        """Not drift, and no retry can help (issue 31 point 6): the verdict carries the error."""
        for job_fp in ("aaaa", None):
            verdict = check_drift("t", "aaaa", job_fp, validation_error())
            assert (verdict.drifted, verdict.run) == (False, False)
            assert isinstance(verdict.error, ArgsRefusedError)
            assert verdict.error.fields == ["user_id"]
            assert "'x'" not in str(verdict.error)

    def test_drift_that_decodes_runs_and_warns_once_per_task_and_fingerprint(self) -> None:
        log = DriftLog()
        first = check_drift("t", "aaaa", "bbbb", None, log=log)
        again = check_drift("t", "aaaa", "bbbb", None, log=log)
        other = check_drift("t", "aaaa", "cccc", None, log=log)
        assert first.run and again.run and other.run
        assert first.warning is not None and "bbbb" in first.warning and "aaaa" in first.warning
        assert again.warning is None and other.warning is not None
        assert log.counts == {("t", "bbbb"): 2, ("t", "cccc"): 1}

    def test_drift_that_does_not_decode_fails_naming_both_fingerprints_and_the_field(self) -> None:
        verdict = check_drift("mail.send", "aaaa", "bbbb", validation_error(), log=DriftLog())
        assert not verdict.run and isinstance(verdict.error, ArgsSchemaMismatch)
        message = str(verdict.error)
        assert "'mail.send'" in message and "bbbb" in message and "aaaa" in message
        assert verdict.error.fields == ["user_id"] and "user_id: Input should be" in message
        assert "'x'" not in message  # values may be secrets

    def test_drift_that_does_not_decode_warns_once_per_task_and_pair_of_fingerprints(self) -> None:
        log = DriftLog()
        first = check_drift("mail.send", "aaaa", "bbbb", validation_error(), log=log)
        again = check_drift("mail.send", "aaaa", "bbbb", validation_error(), log=log)
        other_worker = check_drift("mail.send", "aaaa", "cccc", validation_error(), log=log)
        other_task = check_drift("mail.other", "aaaa", "bbbb", validation_error(), log=log)
        assert first.warning is not None and again.warning is None
        assert other_worker.warning is not None and other_task.warning is not None
        assert "'mail.send'" in first.warning and "aaaa" in first.warning and "bbbb" in first.warning
        assert "fields: user_id" in first.warning and "'x'" not in first.warning
        assert again.error is not None  # the job fails all the same
        assert log.mismatches[("mail.send", "bbbb", "aaaa")] == 2  # (task, job fp, worker fp)
        assert log.counts == {}  # not counted as drift that runs


async def test_a_worker_runs_drifted_jobs_that_decode_and_fails_those_that_do_not(
    app: Any, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    received: list[tuple[int, str]] = []

    @app.task("orders.ship")
    async def ship(order_id: int, note: str = "") -> None:  # the worker gained `note`
        received.append((order_id, note))

    old_client: RemoteTask[dict[str, Any]] = RemoteTask(
        "orders.ship", queue="default", priority=0, max_attempts=3, args_fp="0ld0ld0ld0ld0ld0", args_type=dict
    )
    from akadze import client

    client.configure(engine=app.engine)
    try:
        jobs = [
            await old_client._enqueue({"order_id": 1}),
            await old_client._enqueue({"order_id": 2}),
            await old_client._enqueue({"order_id": "three"}),
            await old_client._enqueue({"order_id": 4, "gone": True}),  # a producer newer than the worker
        ]
    finally:
        await client.dispose()
    with caplog.at_level(logging.WARNING):
        await drain(app)
    rows = await fetch(database_url, "SELECT id, state, attempt, errors FROM akadze_jobs ORDER BY id")
    assert [r["state"] for r in rows] == ["succeeded", "succeeded", "failed", "failed"]
    assert received == [(1, ""), (2, "")]
    warnings = [
        r for r in caplog.records if r.levelno == logging.WARNING and "0ld0ld0ld0ld0ld0" in r.getMessage()
    ]
    # once per task and fingerprint for the jobs that run; once per task and pair of
    # fingerprints for those that fail, naming the fields and never the values
    assert [r.levelno for r in warnings] == [logging.WARNING, logging.WARNING]
    decodes, fails = (r.getMessage() for r in warnings)
    assert "still decodes" in decodes
    assert "'orders.ship'" in fails and app.tasks["orders.ship"].args_fp in fails
    assert "fields: order_id" in fails and "three" not in fails
    for row in rows[2:]:
        assert row["attempt"] == 1  # no retries
        (error,) = __import__("json").loads(row["errors"])
        assert "0ld0ld0ld0ld0ld0" in error["message"] and app.tasks["orders.ship"].args_fp in error["message"]
        assert error["type"].endswith("ArgsSchemaMismatch")
    assert "order_id" in rows[2]["errors"] and "gone" in rows[3]["errors"]
    assert [job.id for job in jobs] == [r["id"] for r in rows]


class TestCheckDriftWithIgnoredArguments:
    def test_ignored_arguments_are_named_in_a_warning_once_per_task_and_fingerprint(self) -> None:
        log = DriftLog()
        first = check_drift("t", "aaaa", "bbbb", None, ignored=["gift_note"], log=log)
        again = check_drift("t", "aaaa", "bbbb", None, ignored=["gift_note"], log=log)
        assert first.run and first.drifted and again.run and again.warning is None
        assert first.warning is not None
        assert "'gift_note'" in first.warning and "unknown_args='ignore'" in first.warning
        assert "bbbb" in first.warning and "aaaa" in first.warning

    def test_ignored_arguments_are_logged_even_without_a_differing_fingerprint(self) -> None:
        log = DriftLog()
        verdict = check_drift("t", "aaaa", "aaaa", None, ignored=["x"], log=log)
        assert (
            verdict.run and not verdict.drifted and verdict.warning is not None and "'x'" in verdict.warning
        )

    def test_an_unknown_argument_under_forbid_says_how_to_let_it_run(self) -> None:
        error = None
        try:
            build_codec("t", base).decode(b'{"a": {"street": "s"}, "c": "red", "n": 1, "gift_note": "x"}')
        except pydantic.ValidationError as exc:
            error = exc
        assert error is not None
        verdict = check_drift("t", "aaaa", "bbbb", error, log=DriftLog())
        assert isinstance(verdict.error, ArgsSchemaMismatch)
        assert verdict.error.fields == ["gift_note"] and "unknown_args='ignore'" in str(verdict.error)


class TestUnknownArgsOption:
    def test_forbid_is_the_default_and_ignore_the_alternative(self, app: Akadze) -> None:
        async def ship(order_id: int) -> None: ...

        assert app.register(ship, name="a").options.unknown_args == "forbid"
        assert app.register(ship, name="b", unknown_args="ignore").options.unknown_args == "ignore"
        assert app.task("c", unknown_args="ignore")(ship).options.unknown_args == "ignore"

    def test_a_bad_value_is_a_config_error(self, app: Akadze) -> None:
        async def ship(order_id: int) -> None: ...

        with pytest.raises(ConfigError, match="unknown_args must be 'forbid' or 'ignore', got 'allow'"):
            app.register(ship, name="a", unknown_args="allow")  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="unknown_args"):
            app.task("b", unknown_args=None)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="unknown_args"):
            TaskOptions(unknown_args="Ignore")  # type: ignore[arg-type]
        assert app.tasks == {}

    def test_the_policy_does_not_change_the_fingerprint(self, app: Akadze) -> None:
        async def ship(order_id: int) -> None: ...

        forbid = app.register(ship, name="a", unknown_args="forbid")
        ignore = app.register(ship, name="b", unknown_args="ignore")
        assert forbid.args_fp == ignore.args_fp == fp(ship)


class NewerShipArgs(TypedDict):
    """The arguments of a producer generated from a worker that has since gained gift_note."""

    order_id: int
    gift_note: str


NEWER_FP = "9e9e9e9e9e9e9e9e"


async def test_an_unknown_argument_fails_under_forbid_and_is_dropped_under_ignore(
    app: Akadze, database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A producer deployed before the worker sends an argument the worker does not declare yet."""
    received: list[tuple[str, int]] = []

    @app.task("orders.strict")
    async def strict(order_id: int) -> None:
        received.append(("strict", order_id))

    @app.task("orders.lenient", unknown_args="ignore")
    async def lenient(order_id: int) -> None:
        received.append(("lenient", order_id))

    from akadze import client

    def newer(name: str) -> RemoteTask[NewerShipArgs]:
        return RemoteTask(
            name, queue="default", priority=0, max_attempts=3, args_fp=NEWER_FP, args_type=NewerShipArgs
        )

    client.configure(engine=app.engine)
    try:
        for name in ("orders.strict", "orders.lenient", "orders.lenient"):
            await newer(name)._enqueue({"order_id": 7, "gift_note": "happy birthday"})
    finally:
        await client.dispose()
    with caplog.at_level(logging.WARNING):
        assert await drain(app) == 3
    rows = await fetch(database_url, "SELECT task, state, attempt, errors FROM akadze_jobs ORDER BY id")
    assert [(r["task"], r["state"], r["attempt"]) for r in rows] == [
        ("orders.strict", "failed", 1),  # no retry
        ("orders.lenient", "succeeded", 1),
        ("orders.lenient", "succeeded", 1),
    ]
    (error,) = json.loads(rows[0]["errors"])
    assert error["type"].endswith("ArgsSchemaMismatch")
    message = error["message"]
    assert "gift_note" in message and NEWER_FP in message and app.tasks["orders.strict"].args_fp in message
    assert "happy birthday" not in message
    assert received == [("lenient", 7), ("lenient", 7)]  # the declared arguments only
    warnings = [r.getMessage() for r in caplog.records if "orders.lenient" in r.getMessage()]
    assert len(warnings) == 1  # once per task and job fingerprint
    assert "'gift_note'" in warnings[0] and NEWER_FP in warnings[0] and "happy birthday" not in warnings[0]


async def test_the_worker_side_enqueue_refuses_unknown_arguments_whatever_the_policy(
    app: Akadze, database_url: str
) -> None:
    async def ship(order_id: int) -> None: ...

    for policy in ("forbid", "ignore"):
        task = app.register(ship, name=f"orders.{policy}", unknown_args=policy)
        with pytest.raises(pydantic.ValidationError, match="gift_note"):
            await task.enqueue(order_id=1, gift_note="x")  # type: ignore[call-arg]
        with pytest.raises(pydantic.ValidationError, match="gift_note"):
            await task.enqueue_many([{"order_id": 1, "gift_note": "x"}])
    assert await fetch(database_url, "SELECT id FROM akadze_jobs") == []


async def test_arguments_a_validator_refuses_at_run_fail_at_once_naming_the_field(
    app: Any, database_url: str
) -> None:
    """Issue 31 point 6: a client cannot run the worker's validator, so it writes the row; the
    worker's refusal is final (one attempt, failed, the field named), not retried."""
    runs: list[str] = []

    @app.task("mail.post", max_attempts=5)
    async def post(to: Postcode) -> None:
        runs.append(to.code)

    client_task: RemoteTask[dict[str, Any]] = RemoteTask(
        "mail.post", queue="default", priority=0, max_attempts=5, args_fp=post.args_fp, args_type=dict
    )
    from akadze import client

    client.configure(engine=app.engine)
    try:
        await client_task._enqueue({"to": {"code": "1011AB"}})  # the validator refuses it
        await client_task._enqueue({"to": {"code": "1011NL"}})
    finally:
        await client.dispose()
    await drain(app)
    rows = await fetch(database_url, "SELECT state, attempt, errors FROM akadze_jobs ORDER BY id")
    assert [(r["state"], r["attempt"]) for r in rows] == [("failed", 1), ("succeeded", 1)]
    (error,) = json.loads(rows[0]["errors"])
    assert error["type"].endswith("ArgsRefusedError")
    assert "to.code" in error["message"] and "1011AB" not in error["message"]
    assert runs == ["1011NL"]


class Batch(BaseModel):
    inner: pydantic.Json[list[int]]


async def test_a_json_argument_travels_as_its_text_from_both_sides(app: Any, database_url: str) -> None:
    """Issue 31 point 6: ``Json[list[int]]`` is read from a string, so both the worker-side
    enqueue and a client write the JSON text, and the job runs with the parsed value."""
    got: list[Any] = []

    @app.task("stats.sum")
    async def total(ids: pydantic.Json[list[int]], batch: Batch) -> None:
        got.append((ids, batch.inner))

    await total.enqueue(ids="[1, 2]", batch=Batch(inner="[3]"))  # type: ignore[arg-type]  # pydantic's Json takes the text
    client_task: RemoteTask[dict[str, Any]] = RemoteTask(
        "stats.sum", queue="default", priority=0, max_attempts=3, args_fp=total.args_fp, args_type=dict
    )
    from akadze import client

    client.configure(engine=app.engine)
    try:
        await client_task._enqueue({"ids": "[4]", "batch": {"inner": "[5, 6]"}})
    finally:
        await client.dispose()
    await drain(app)
    rows = await fetch(database_url, "SELECT state, args FROM akadze_jobs ORDER BY id")
    assert [r["state"] for r in rows] == ["succeeded", "succeeded"]
    assert json.loads(rows[0]["args"]) == {"ids": "[1,2]", "batch": {"inner": "[3]"}}
    assert got == [([1, 2], [3]), ([4], [5, 6])]
