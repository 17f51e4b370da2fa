"""A producer that has only akadze and the generated package enqueues; the worker runs the jobs
and each task receives its declared types (hard cases 16-30 on the wire, through PostgreSQL), and
partials and callable instances get the arguments their clients send (cases 5 and 6)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from akadze import Akadze
from akadze.testing import drain
from tests.codegen.apps.registration.helpers import RECEIVED as GREETED
from tests.codegen.apps.wire import billing, kinds, shapes, shipping
from tests.codegen.apps.wire.received import RECEIVED
from tests.codegen.checkers import GOLDEN, ROOT
from tests.support import fetch

#: runs in the producer's process: only akadze and the generated ``wire`` package are importable
PRODUCER = r"""
import asyncio, importlib.abc, importlib.util, json, sys, uuid
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tests", "examples"):
            raise ImportError(f"the producer must not import worker code ({name})")
        return None

sys.meta_path.insert(0, Refuse())
import akadze.client
from wire import billing, kinds, shipping

async def main():
    akadze.client.configure(database_url=sys.argv[1])
    address = shipping.ShippingAddress(
        street="Main 1", zip_code="1011", house_number=5, city="Amsterdam", country="NL"
    )
    jobs = [
        await shipping.ship_parcel.enqueue(
            to=address,
            options=shipping.Options(must=None, maybe=2, tags=["fragile"]),
            pet=shipping.Dog(good=False),
            cost=shipping.Money(cents=250),
            required_none=None,
            optional_none=3,
        ),
        await shipping.ship_tree.enqueue(
            root=shipping.Node(value=1, children=[shipping.Node(value=2)]),
            order=shipping.Order(
                lines=[shipping.Line(sku="a", quantity=2)],
                note=shipping.Comment(text="hi", about=shipping.Order(lines=[])),
            ),
        ),
        await shipping.ship_pages.enqueue(
            addresses=shipping.Page(items=[address], total=1),
            numbers=shipping.Page[int](items=[1, 2]),
            box=shipping.Box(item=3),
            boxes=[shipping.Box(item="x", label="y")],
        ),
        await billing.billing_invoice.enqueue(
            bill_to=billing.BillingAddress(iban="NL00BANK", holder="Ada"), amount=billing.Money(cents=100)
        ),
        await kinds.kinds_enums.enqueue(
            color=kinds.Color.CRIMSON, level=kinds.Level.HIGH, mode=kinds.Mode.SPACED,
            perm=kinds.Perm.READ | kinds.Perm.WRITE, red=kinds.Color.RED, any_of=None,
        ),
        await kinds.kinds_times.enqueue(
            blob=kinds.Blob(data=b"\x00\xffbin"),
            raw=b"\x01\x02",
            aware=datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=timezone(timedelta(hours=2))),
            naive=datetime(2024, 5, 6, 7, 8, 9),
            day=date(2024, 5, 6),
            at=time(7, 8, 9),
            wait=timedelta(days=1, seconds=90, microseconds=5),
            when=datetime(2024, 1, 1, tzinfo=UTC),
        ),
        await kinds.kinds_numbers.enqueue(
            price=kinds.Price(amount=Decimal("123456.78"), id=uuid.UUID(int=1)),
            plain=Decimal("0.0000001"),
            uid=uuid.UUID(int=2),
            positive=3,
            small=10,
            code="ABC",
        ),
        await kinds.kinds_containers.enqueue(
            by_int={1: kinds.Point(1, 2)},
            by_uuid={uuid.UUID(int=3): "x"},
            by_enum={kinds.Level.LOW: 1},
            unique={1, 2},
            frozen=frozenset({"a"}),
            pair=(1, "a"),
            many=(1, 2, 3),
            point=kinds.Point(x=5, y=6),
        ),
        await kinds.kinds_aliases.enqueue(
            user=kinds.UserId(5), ids=[kinds.UserId(1)], scores={"a": 1.5}, either="x"
        ),
        await kinds.kinds_models.enqueue(
            labels=["a", "b"],
            child=kinds.Child(name="c", size=1.5),
            settings=kinds.Settings(name="s", seed=21, retries=1),
            meta={"tag": "t", "source": "s"},
        ),
    ]
    await akadze.client.dispose()
    print(json.dumps([[job.id, job.task, job.args_fp] for job in jobs]))
    print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] in ("tests", "examples"))))

asyncio.run(main())
"""


def worker_app(make_app: Any) -> Akadze:
    """The wire app's tasks on this test's database (the same modules, so the same schemas)."""
    app: Akadze = make_app()
    for module in (
        "tests.codegen.apps.wire.shipping",
        "tests.codegen.apps.wire.billing",
        "tests.codegen.apps.wire.kinds",
    ):
        app.include(module)
    return app


@pytest.fixture
def producer_path(tmp_path: Path) -> Path:
    """A directory holding only akadze and the generated package: the producer's sys.path."""
    site = tmp_path / "producer"
    site.mkdir()
    (site / "akadze").symlink_to(ROOT / "akadze")
    (site / "wire").symlink_to(GOLDEN / "wire")
    return site


async def test_a_producer_without_the_worker_enqueues_and_tasks_receive_their_types(
    make_app: Any, database_url: str, producer_path: Path
) -> None:
    app = worker_app(make_app)
    done = subprocess.run(
        [sys.executable, "-c", PRODUCER, database_url],
        cwd=producer_path,
        env={**os.environ, "PYTHONPATH": str(producer_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    jobs_line, imported_line = done.stdout.strip().splitlines()[-2:]
    assert json.loads(imported_line) == []
    enqueued = json.loads(jobs_line)
    for _, task, args_fp in enqueued:
        assert args_fp == app.tasks[task].args_fp

    RECEIVED.clear()
    assert await drain(app) == len(enqueued)
    rows = await fetch(database_url, "SELECT task, state, errors FROM akadze_jobs ORDER BY id")
    assert [(r["task"], r["state"]) for r in rows] == [(task, "succeeded") for _, task, _ in enqueued]
    received = dict(RECEIVED)

    parcel = received["ship.parcel"]
    assert parcel["to"] == shipping.Address(
        street="Main 1", zip_code="1011", nr=5, town="Amsterdam", country="NL"
    )
    assert parcel["options"] == shipping.Options(must=None, maybe=2, five=5, tags=["fragile"])
    assert parcel["pet"] == shapes.Dog(good=False)  # the tag travelled (case 18)
    assert parcel["cost"] == shapes.Money(cents=250, currency="EUR")  # the worker's default
    assert (parcel["required_none"], parcel["optional_none"], parcel["five"]) == (None, 3, 5)

    tree = received["ship.tree"]
    assert tree["root"] == shapes.Node(value=1, children=[shapes.Node(value=2, children=[])])
    assert isinstance(tree["order"].note.about, shapes.Order)

    pages = received["ship.pages"]
    assert isinstance(pages["addresses"].items[0], shipping.Address)
    assert pages["numbers"].items == [1, 2]
    assert pages["box"] == shipping.Box(item=3, label="")
    assert pages["boxes"] == [shipping.Box(item="x", label="y")]

    assert received["billing.invoice"]["bill_to"] == billing.Address(iban="NL00BANK", holder="Ada")

    enums = received["kinds.enums"]
    assert enums["color"] is kinds.Color.RED and enums["level"] is kinds.Level.HIGH
    assert enums["mode"] is kinds.Mode.SPACED and enums["perm"] == kinds.Perm.READ | kinds.Perm.WRITE
    assert enums["any_of"] is None

    times = received["kinds.times"]
    assert times["blob"].data == b"\x00\xffbin" and times["raw"] == b"\x01\x02"  # case 23
    assert times["aware"] == datetime(2024, 5, 6, 5, 8, 9, 123456, tzinfo=UTC)
    assert times["aware"].utcoffset() == timedelta(hours=2)
    assert times["naive"] == datetime(2024, 5, 6, 7, 8, 9) and times["naive"].tzinfo is None
    assert (times["day"], times["at"]) == (date(2024, 5, 6), time(7, 8, 9))
    assert times["wait"] == timedelta(days=1, seconds=90, microseconds=5)

    numbers = received["kinds.numbers"]
    assert numbers["price"] == kinds.Price(amount=Decimal("123456.78"), id=uuid.UUID(int=1))
    assert numbers["plain"] == Decimal("0.0000001") and numbers["uid"] == uuid.UUID(int=2)

    containers = received["kinds.containers"]
    assert containers["by_int"] == {1: kinds.Point(1, 2)}
    assert containers["by_uuid"] == {uuid.UUID(int=3): "x"}
    assert containers["by_enum"] == {kinds.Level.LOW: 1}
    assert containers["unique"] == {1, 2} and containers["frozen"] == frozenset({"a"})
    assert containers["pair"] == (1, "a") and containers["many"] == (1, 2, 3)
    assert isinstance(containers["point"], kinds.Point)

    aliases = received["kinds.aliases"]
    assert (aliases["user"], aliases["ids"], aliases["scores"], aliases["either"]) == (
        5,
        [1],
        {"a": 1.5},
        "x",
    )

    models = received["kinds.models"]
    assert models["labels"] == kinds.Labels(["a", "b"])
    assert models["child"].size == 1.5 and models["child"].internal == "x"
    assert models["settings"].derived == 42 and models["settings"].retries == 1
    assert models["meta"] == {"tag": "t", "source": "s"}


async def test_the_generated_client_inserts_the_row_the_worker_side_enqueue_inserts(
    make_app: Any, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = worker_app(make_app)
    monkeypatch.syspath_prepend(str(GOLDEN))
    from wire import billing as client_billing, kinds as client_kinds

    import akadze.client

    akadze.client.configure(database_url=database_url)
    try:
        produced = [
            await client_billing.billing_invoice.using(priority=7).enqueue(
                bill_to=client_billing.BillingAddress(iban="NL00", holder="Ada"),
                amount=client_billing.Money(cents=1, currency="USD"),
            ),
            await client_kinds.kinds_enums.enqueue(
                color=client_kinds.Color.GREEN,
                level=client_kinds.Level.LOW,
                mode=client_kinds.Mode.DASHED,
                perm=client_kinds.Perm.WRITE,
                red=client_kinds.Color.RED,
                any_of=1,
            ),
            await client_kinds.kinds_numbers.enqueue(
                price=client_kinds.Price(amount=Decimal("1.50"), id=uuid.UUID(int=9)),
                plain=Decimal("2"),
                uid=uuid.UUID(int=8),
                positive=1,
                small=2,
                code="XYZ",
            ),
        ]
    finally:
        await akadze.client.dispose()
    direct = [
        await app.tasks["billing.invoice"]
        .using(priority=7)
        .enqueue(
            bill_to=billing.Address(iban="NL00", holder="Ada"),
            amount=shapes.Money(cents=1, currency="USD"),
        ),
        await app.tasks["kinds.enums"].enqueue(
            color=kinds.Color.GREEN,
            level=kinds.Level.LOW,
            mode=kinds.Mode.DASHED,
            perm=kinds.Perm.WRITE,
            red=kinds.Color.RED,
            any_of=1,
        ),
        await app.tasks["kinds.numbers"].enqueue(
            price=kinds.Price(amount=Decimal("1.50"), id=uuid.UUID(int=9)),
            plain=Decimal("2"),
            uid=uuid.UUID(int=8),
            positive=1,
            small=2,
            code="XYZ",
        ),
    ]
    columns = "task, queue, priority, max_attempts, args, args_fp, state, expires_at"
    for client_job, worker_job in zip(produced, direct, strict=True):
        query = f"SELECT {columns} FROM akadze_jobs WHERE id = $1"
        mine = (await fetch(database_url, query, client_job.id))[0]
        theirs = (await fetch(database_url, query, worker_job.id))[0]
        # jsonb's text form is canonical: equal text, equal arguments
        assert dict(mine) == dict(theirs)


@pytest.fixture
async def registration_clients(database_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    """The golden ``registration`` package's mail module, enqueueing into this test's database."""
    monkeypatch.syspath_prepend(str(GOLDEN))
    from registration import mail as client_mail

    import akadze.client

    akadze.client.configure(database_url=database_url)
    yield client_mail
    await akadze.client.dispose()


async def test_partial_and_callable_instance_tasks_run_with_what_their_clients_send(
    make_app: Any, database_url: str, registration_clients: Any
) -> None:
    """Cases 5 and 6: the bound arguments come from the worker, the others from the producer."""
    app: Akadze = make_app()
    app.include("tests.codegen.apps.registration.mail")
    client_mail = registration_clients
    # the clients take no bound argument: the keyword partial's tenant and loud are not theirs
    assert set(client_mail.MailGreetKeywordArgs.__annotations__) == {"user_id", "on"}
    assert set(client_mail.MailGreetPositionalArgs.__annotations__) == {"user_id", "on", "loud"}
    assert set(client_mail.MailGreetInstanceArgs.__annotations__) == {"user_id", "on", "loud"}
    produced = [
        await client_mail.mail_greet_positional.enqueue(user_id=1, on=date(2026, 11, 29)),
        await client_mail.mail_greet_keyword.enqueue(user_id=2, on=date(2026, 11, 30)),
        await client_mail.mail_greet_instance.using(priority=2).enqueue(
            user_id=3, on=date(2026, 12, 1), loud=True
        ),
    ]
    with pytest.raises(TypeError, match="tenant"):  # untyped callers are checked at run time
        await client_mail.mail_greet_keyword.enqueue(user_id=4, on=date(2026, 12, 2), tenant="evil")
    direct = [
        await app.tasks["mail.greet.positional"].enqueue(user_id=1, on=date(2026, 11, 29)),
        await app.tasks["mail.greet.keyword"].enqueue(user_id=2, on=date(2026, 11, 30)),
        await app.tasks["mail.greet.instance"]
        .using(priority=2)
        .enqueue(user_id=3, on=date(2026, 12, 1), loud=True),
    ]
    columns = "task, queue, priority, max_attempts, args, args_fp, state"
    for client_job, worker_job in zip(produced, direct, strict=True):
        query = f"SELECT {columns} FROM akadze_jobs WHERE id = $1"
        assert dict((await fetch(database_url, query, client_job.id))[0]) == dict(
            (await fetch(database_url, query, worker_job.id))[0]
        )

    GREETED.clear()
    assert await drain(app) == 6
    rows = await fetch(database_url, "SELECT state FROM akadze_jobs")
    assert {r["state"] for r in rows} == {"succeeded"}
    by_user = sorted(GREETED, key=lambda r: r[1]["user_id"])
    expected = [
        ("greet", {"tenant": "acme", "user_id": 1, "on": date(2026, 11, 29), "loud": False}),
        ("greet", {"tenant": "globex", "user_id": 2, "on": date(2026, 11, 30), "loud": True}),
        ("greeter", {"tenant": "initech", "user_id": 3, "on": date(2026, 12, 1), "loud": True}),
    ]
    assert by_user == [e for e in expected for _ in (0, 1)]  # the client's job and the worker's


async def test_a_worker_default_changed_after_generation_applies_to_jobs_from_the_old_client(
    make_app: Any, database_url: str, registration_clients: Any
) -> None:
    """Case 16: the client leaves a defaulted argument out, so the worker's current default applies."""
    seen: list[str] = []

    async def notify(user_id: int, message: str = "changed since the clients were generated") -> None:
        seen.append(message)

    app: Akadze = make_app()
    task = app.register(notify, name="mail.notify", queue="mail")
    client_mail = registration_clients
    assert client_mail.mail_notify.args_fp == task.args_fp  # a default is not part of the schema
    await client_mail.mail_notify.enqueue(user_id=5)
    assert await drain(app) == 1
    assert seen == ["changed since the clients were generated"]
