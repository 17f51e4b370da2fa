"""Batch enqueue's fast path (akadze/codec/batch.py, enqueue_batch.sql): the same payloads, the same
refusals and the same Jobs as enqueuing the items one by one."""

from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from types import MappingProxyType
from typing import Any
from uuid import UUID

import pydantic
import pytest
from sqlalchemy import text

from akadze import Akadze
from akadze.codec import ArgsCodec
from akadze.codec.batch import encode_many
from akadze.codec.stored import MAX_JSON_DEPTH
from tests.support import fetchval


class Point(pydantic.BaseModel):
    x: float
    y: float
    label: str = ""


@dataclasses.dataclass
class Box:
    low: int
    high: int


def _offline(max_args_bytes: int = 1024 * 1024) -> Akadze:
    return Akadze(database_url="postgresql://nobody@127.0.0.1:1/none", max_args_bytes=max_args_bytes)


def _rich_codec(max_args_bytes: int = 1024 * 1024) -> ArgsCodec:
    app = _offline(max_args_bytes)

    @app.task("rich")
    async def rich(
        n: int,
        at: datetime,
        ident: UUID,
        amount: Decimal,
        point: Point,
        box: Box,
        tags: list[str] | None = None,
        anything: Any = None,
    ) -> None: ...

    return rich.codec


def _item(n: int, **changes: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "n": n,
        "at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "ident": UUID(int=n),
        "amount": Decimal("1.10"),
        "point": Point(x=n, y=0.5),
        "box": {"low": 1, "high": n},
        "tags": ["a", "[{", "null"],
    }
    item.update(changes)
    return item


def test_the_batch_writes_what_encode_writes_item_by_item() -> None:
    codec = _rich_codec()
    items = [_item(n) for n in range(50)] + [_item(50, tags=None, anything={"f": 1.5})]
    assert encode_many(codec, items) == [codec.encode(item) for item in items]


def test_any_mapping_is_an_item() -> None:
    """Items go to the validator as given (no copy): a read-only or ordered mapping is one."""
    codec = _rich_codec()
    items: list[Mapping[str, Any]] = [
        MappingProxyType(_item(1, tags=["x"])),
        OrderedDict(_item(2, tags=["y"])),
        _item(3, tags=["z"]),
    ]
    assert encode_many(codec, items) == [codec.encode(dict(item)) for item in items]
    assert encode_many(codec, iter(items)) == encode_many(codec, items)


def test_plain_arguments_take_the_batch_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """No item goes through encode() one by one when every batch check passes."""
    codec = _rich_codec()
    items = [_item(n, tags=["plain"]) for n in range(20)]
    expected = [codec.encode(item) for item in items]

    def one_by_one(self: ArgsCodec, kwargs: Any) -> str:
        raise AssertionError("encode() called for an item of a batch")

    monkeypatch.setattr(ArgsCodec, "encode", one_by_one)
    monkeypatch.setattr(ArgsCodec, "encode_validated", one_by_one)
    assert encode_many(codec, items) == expected


def _deep(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    "bad",
    [
        {"n": "not a number"},
        {"unknown": 1},
        {"tags": ["a\x00b"]},
        {"anything": float("nan")},
        {"point": Point(x=float("inf"), y=0)},
        {"anything": _deep(MAX_JSON_DEPTH + 5)},
        {"anything": _deep(MAX_JSON_DEPTH)},
        {"anything": "x" * 5000},
        {"anything": object()},
    ],
    ids=[
        "invalid",
        "unknown",
        "nul",
        "nan",
        "inf-in-model",
        "too-deep",
        "one-too-deep",
        "too-large",
        "no-json",
    ],
)
def test_a_bad_item_is_refused_as_encode_refuses_it(bad: dict[str, Any]) -> None:
    codec = _rich_codec(max_args_bytes=4096)
    item = {**_item(3), **bad}
    with pytest.raises(Exception) as alone:
        codec.encode(item)
    with pytest.raises(type(alone.value)) as in_batch:
        encode_many(codec, [_item(1), _item(2), item, _item(4)])
    assert str(in_batch.value) == str(alone.value)


async def test_the_jobs_returned_are_the_rows_stored(app: Akadze, database_url: str) -> None:
    @app.task("t", priority=3, max_attempts=7)
    async def t(n: int, note: str | None = None) -> None: ...

    items = [{"n": n, "note": f"#{n}"} if n % 2 else {"n": n} for n in range(300)]
    jobs = await t.enqueue_many(items)
    assert [job.args for job in jobs] == items
    assert [job.id for job in jobs] == sorted(job.id for job in jobs)
    for job in jobs[:3] + jobs[-3:]:
        assert await app.get_job(job.id) == job
    stored = await fetchval(database_url, "SELECT array_agg(args::text ORDER BY id) FROM akadze_jobs")
    assert [json.loads(text) for text in stored] == items


def test_items_each_under_the_nesting_limit_pass_whatever_the_batch_holds() -> None:
    """The batch's nesting bound adds the deepest lists to the deepest objects of different
    items: past it, every item gets the exact check, and none is refused wrongly."""
    codec = _rich_codec()
    lists = _deep(MAX_JSON_DEPTH - 2)
    objects: Any = "leaf"
    for _ in range(MAX_JSON_DEPTH - 2):
        objects = {"k": objects}
    items = [_item(1, anything=lists), _item(2, anything=objects), _item(3)]
    assert encode_many(codec, items) == [codec.encode(item) for item in items]


@pytest.mark.parametrize("when", ["now", "delay", "run_at"])
async def test_the_batch_returns_the_due_time_and_creation_time_the_rows_hold(
    app: Akadze, database_url: str, when: str
) -> None:
    """run_at and created_at come back computed once for the statement (its now()), not read
    from each row: they must still be what every row holds, in the caller's transaction too."""

    @app.task("t")
    async def t(n: int) -> None: ...

    options: dict[str, Any] = {
        "now": {},
        "delay": {"delay": timedelta(minutes=5)},
        "run_at": {"run_at": datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)},
    }[when]
    async with app.engine.begin() as conn:
        await conn.execute(text("SELECT pg_sleep(0.05)"))  # the transaction's now() is behind the clock
        in_tx = await t.using(session=conn, priority=4, **options).enqueue_many([{"n": n} for n in range(3)])
    alone = await t.using(**options).enqueue_many([{"n": n} for n in range(3, 5)])
    for job in in_tx + alone:
        assert await app.get_job(job.id) == job
    assert len({job.created_at for job in in_tx}) == 1
    started = await fetchval(database_url, "SELECT min(created_at) FROM akadze_jobs")
    assert started == in_tx[0].created_at
