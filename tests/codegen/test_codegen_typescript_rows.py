"""The row a TypeScript client inserts is the row the Python client inserts for the same call
(issue 31 point 3), refusals included, and an old TypeScript client meets a new worker as an old
Python client does (point 5): its jobs fail at once, naming both fingerprints and no value."""

from __future__ import annotations

import datetime as dt
import decimal
import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from akadze import Akadze, client as akadze_client
from akadze.client import InvalidArgsError
from akadze.errors import ArgsTooDeepError, ArgsTooLargeError
from akadze.testing import drain
from tests.codegen.ts_node import Harness, both_clients, build, generate, libpq_url, require_node
from tests.support import fetch

APP = "tests.codegen.apps.producers.worker:app"
COLUMNS = (
    "task, queue, priority, args, args_fp, max_attempts, unique_key, unique_states, "
    + "state, attempt, expires_at"
)


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Any]]:
    """(the built TypeScript package's dist, the Python client module) of the producers app."""
    for dist, _package in both_clients(
        APP, tmp_path_factory.mktemp("clients"), "tsclients", "pyclients_ts_rows"
    ):
        yield dist, importlib.import_module("pyclients_ts_rows.orders")


#: the same calls, as Python values and as the harness's tagged JSON for Node
CALLS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "orders.place",
        {
            "order_id": 7,
            "to": {"street": "Main 1", "zipCode": "1011AB"},
            "payment": {"kind": "card", "last4": "1234"},
            "parcel": {"weight": "1.50", "label": "aGk="},
            "color": "red",
        },
        {},
    ),
    (
        "orders.place",
        {
            "order_id": 2**60,
            "to": {"street": "Main 1", "zipCode": "1011AB", "country": "BE"},
            "payment": {"kind": "transfer", "iban": "NL00BANK"},
            "parcel": {"weight": "12"},
            "color": "green",
            "priority": 10,
            "at": "2030-01-02T03:04:05.120000Z",
            "on": "2030-01-02",
            "ref": "12345678-1234-1234-1234-123456789abc",
            "within": "PT90S",
            "tags": ["a", "é"],
            "counts": {"x": 1, "y": -2},
            "ratio": 0.25,
            "note": None,
        },
        {"priority": 9, "queue": "orders_slow"},
    ),
    ("orders.remind", {"order_id": 5, "text": "hi"}, {}),
    ("orders.stats", {"ids": "[1, 2]", "post": {"code": "1011NL"}, "due": "2099-01-01"}, {}),
]


def _python_value(task: str, args: dict[str, Any], module: Any) -> dict[str, Any]:
    """The call as a Python producer writes it: mirror Structs, enums, datetimes, bytes."""
    if task != "orders.place":
        return dict(args)
    value = dict(args)
    value["to"] = msgspec.convert(args["to"], module.Address, strict=False)
    kind = module.Card if args["payment"]["kind"] == "card" else module.Transfer
    value["payment"] = msgspec.convert(args["payment"], kind)
    parcel = dict(args["parcel"])
    parcel["weight"] = decimal.Decimal(parcel["weight"])
    if "label" in parcel:
        parcel["label"] = b"hi"
    value["parcel"] = module.Parcel(**parcel)
    value["color"] = module.Color(args["color"])
    if "priority" in args:
        value["priority"] = module.Priority(args["priority"])
    if "at" in args:
        value["at"] = dt.datetime(2030, 1, 2, 3, 4, 5, 120000, tzinfo=dt.UTC)
        value["on"] = dt.date(2030, 1, 2)
        value["ref"] = __import__("uuid").UUID(args["ref"])
        value["within"] = dt.timedelta(seconds=90)
    return value


def _node_value(task: str, args: dict[str, Any]) -> dict[str, Any]:
    """The call as a Node producer writes it: a Date, a Uint8Array, a bigint, seconds."""
    value = json.loads(json.dumps(args))
    if task == "orders.place":
        if "label" in value["parcel"]:
            value["parcel"]["label"] = {"$bytes": "aGk="}
        if value["order_id"] > 2**53:
            value["order_id"] = {"$bigint": str(value["order_id"])}
        if "at" in value:
            value["at"] = {"$date": "2030-01-02T03:04:05.120Z"}
            value["within"] = 90
    return value


async def _rows(database_url: str) -> list[dict[str, Any]]:
    rows = await fetch(database_url, f"SELECT {COLUMNS} FROM akadze_jobs ORDER BY id")
    return [{**dict(r), "args": json.loads(r["args"])} for r in rows]


async def test_python_and_node_store_the_same_row_for_the_same_call(
    app: Akadze, database_url: str, packages: tuple[Path, Any]
) -> None:
    dist, module = packages
    akadze_client.configure(engine=app.engine)
    tasks = {t.name: t for t in vars(module).values() if isinstance(t, akadze_client.RemoteTask)}
    try:
        for name, args, options in CALLS:
            using = tasks[name].using(priority=options.get("priority"), queue=options.get("queue"))
            await using._enqueue(_python_value(name, args, module))
    finally:
        await akadze_client.dispose()
    python_rows = await _rows(database_url)
    await fetch(database_url, "DELETE FROM akadze_jobs")
    harness = Harness(dist, libpq_url(database_url))
    try:
        for name, args, options in CALLS:
            answer = harness.ask(
                {"op": "enqueue", "task": name, "args": _node_value(name, args), "options": options}
            )
            assert answer["ok"], answer
    finally:
        harness.close()
    node_rows = await _rows(database_url)
    assert len(python_rows) == len(CALLS)
    assert node_rows == python_rows


async def test_unique_keys_match_across_languages(
    app: Akadze, database_url: str, packages: tuple[Path, Any]
) -> None:
    """A job enqueued from Python holds its key against the same call from Node."""
    dist, module = packages
    akadze_client.configure(engine=app.engine)
    try:
        first = await module.orders_remind._enqueue({"order_id": 9, "text": "a"})
    finally:
        await akadze_client.dispose()
    harness = Harness(dist, libpq_url(database_url))
    try:
        again = harness.ask({"op": "enqueue", "task": "orders.remind", "args": {"order_id": 9, "text": "b"}})
        other = harness.ask(
            {
                "op": "enqueueMany",
                "task": "orders.remind",
                "items": [{"order_id": 10}, {"order_id": 10}, {"order_id": 9}],
            }
        )
    finally:
        harness.close()
    assert again["jobs"] == [{"id": str(first.id), "duplicate": True}]
    ids = [job["id"] for job in other["jobs"]]
    assert ids[0] == ids[1] and ids[2] == str(first.id)
    assert [job["duplicate"] for job in other["jobs"]] == [False, True, True]
    assert len(await fetch(database_url, "SELECT id FROM akadze_jobs")) == 2


async def test_node_refuses_what_python_refuses_before_any_sql(
    app: Akadze, database_url: str, packages: tuple[Path, Any]
) -> None:
    dist, _ = packages
    good = CALLS[0][1]
    deep: Any = "x"
    for _ in range(120):
        deep = [deep]
    cases = {
        "InvalidArgsError": {**good, "order_id": "7"},
        "ArgsTooDeepError": {**good, "to": {"street": "s", "zipCode": "1011AB", "country": deep}},
        "ArgsTooLargeError": {**good, "to": {"street": "s" * (1024 * 1024), "zipCode": "1011AB"}},
    }
    harness = Harness(dist, libpq_url(database_url))
    try:
        answers = {
            name: harness.ask({"op": "enqueue", "task": "orders.place", "args": args})
            for name, args in cases.items()
        }
        zip_short = harness.ask(
            {
                "op": "enqueue",
                "task": "orders.place",
                "args": {**good, "to": {"street": "s", "zipCode": "101"}},
            }
        )
        secret = harness.ask(
            {
                "op": "enqueue",
                "task": "orders.place",
                "args": {**good, "payment": {"kind": "card", "last4": "s3cr3t"}},
            }
        )
    finally:
        harness.close()
    for name, answer in answers.items():
        assert not answer["ok"] and answer["name"] == name, answer
    assert zip_short["path"] == "$.to.zipCode" and "length >= 4" in zip_short["error"]
    assert secret["path"] == "$.payment.last4" and "s3cr3t" not in secret["error"]
    assert await fetch(database_url, "SELECT id FROM akadze_jobs") == []
    # the Python client's refusals of the same calls, for the record
    assert issubclass(InvalidArgsError, ValueError) and issubclass(ArgsTooDeepError, ValueError)
    assert issubclass(ArgsTooLargeError, ValueError)


async def test_an_old_typescript_client_against_a_new_worker_fails_at_once_with_both_fingerprints(
    app: Akadze, database_url: str, tmp_path: Path
) -> None:
    """The worker gained a required parameter after the client was generated (point 5)."""
    require_node()

    @app.task("orders.ship")
    async def ship(order_id: int) -> None: ...

    old = manifest_of_app(app)
    dist = build(generate(old, tmp_path / "old_clients"))
    app.tasks.pop("orders.ship")

    @app.task("orders.ship")
    async def ship_now(order_id: int, carrier: str) -> None: ...

    harness = Harness(dist, libpq_url(database_url))
    try:
        answer = harness.ask({"op": "enqueue", "task": "orders.ship", "args": {"order_id": 1}})
    finally:
        harness.close()
    assert answer["ok"], answer
    await drain(app)
    (row,) = await fetch(database_url, "SELECT state, attempt, errors, args_fp FROM akadze_jobs")
    (error,) = json.loads(row["errors"])
    assert (row["state"], row["attempt"]) == ("failed", 1)
    assert error["type"].endswith("ArgsSchemaMismatch")
    assert row["args_fp"] in error["message"] and ship_now.args_fp in error["message"]
    assert "carrier" in error["message"]


def manifest_of_app(app: Akadze) -> Any:
    """The manifest of an app built in the test (not importable by path)."""
    from akadze_codegen.discover import build_manifest

    return build_manifest(app, "tests:app")


async def test_ids_keep_every_digit_whatever_int8_parser_the_caller_set(
    app: Akadze, database_url: str, packages: tuple[Path, Any]
) -> None:
    # the client reads every column as its text: a process that set pg's int8 parsers to
    # Number (as many do) still gets ids past 2**53 with every digit, one by one, in a batch and
    # through Unique
    dist, _ = packages
    await fetch(database_url, "SELECT setval(pg_get_serial_sequence('akadze_jobs', 'id'), 9007199254740992)")
    good = _node_value("orders.place", CALLS[0][1])
    harness = Harness(dist, libpq_url(database_url), env={"AKADZE_HARNESS_INT8_AS_NUMBER": "1"})
    try:
        one = harness.ask({"op": "enqueue", "task": "orders.place", "args": good})
        many = harness.ask({"op": "enqueueMany", "task": "orders.place", "items": [good, good]})
        unique = harness.ask({"op": "enqueue", "task": "orders.remind", "args": {"order_id": 3}})
    finally:
        harness.close()
    ids = [r["id"] for r in await fetch(database_url, "SELECT id::text AS id FROM akadze_jobs ORDER BY id")]
    assert ids[0] == str(2**53 + 1)
    assert [job["id"] for job in one["jobs"] + many["jobs"] + unique["jobs"]] == ids


async def test_a_batch_is_written_whole_or_item_by_item_with_the_same_refusals(
    app: Akadze, database_url: str, packages: tuple[Path, Any]
) -> None:
    # a batch within a third of the size limit is written by one JSON.stringify; a larger one,
    # or one holding a bigint, item by item (each item counted against the limit)
    dist, _ = packages
    good = _node_value("orders.place", CALLS[0][1])
    big = {**good, "order_id": {"$bigint": str(2**60 + 1)}}
    large = {**good, "note": "n" * (400 * 1024)}
    too_large = {**good, "note": "n" * (1024 * 1024)}
    harness = Harness(dist, libpq_url(database_url))
    try:
        refused = harness.ask({"op": "enqueueMany", "task": "orders.place", "items": [good, too_large]})
        answers = [
            harness.ask({"op": "enqueueMany", "task": "orders.place", "items": items})
            for items in ([good, big], [large, large, good])
        ]
    finally:
        harness.close()
    assert not refused["ok"] and refused["name"] == "ArgsTooLargeError", refused
    assert all(answer["ok"] for answer in answers), answers
    rows = await fetch(
        database_url,
        "SELECT args->>'order_id' AS order_id, length(args->>'note') AS note FROM akadze_jobs ORDER BY id",
    )
    assert [(r["order_id"], r["note"]) for r in rows] == [
        ("7", None),
        (str(2**60 + 1), None),
        ("7", 400 * 1024),
        ("7", 400 * 1024),
        ("7", None),
    ]
