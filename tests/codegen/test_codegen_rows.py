"""The worker-side enqueue and a generated client store the same row for the same values, and the
worker runs it (issue 18.1): models whose serialization keys differ from their validation keys
(``serialization_alias``, an ``AliasGenerator`` with two functions, a pydantic dataclass with
aliases, which msgspec alone writes under its field names) and computed fields."""

from __future__ import annotations

import json
import sys
import types
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import akadze.client
from akadze import Akadze
from akadze.testing import drain
from tests.codegen.apps.wire import billing, shapes, shipping
from tests.codegen.apps.wire.received import RECEIVED
from tests.codegen.checkers import GOLDEN
from tests.support import fetch


@pytest.fixture(scope="module")
def wire() -> Iterator[types.SimpleNamespace]:
    sys.path.insert(0, str(GOLDEN))
    try:
        from wire import billing as client_billing, shipping as client_shipping

        yield types.SimpleNamespace(billing=client_billing, shipping=client_shipping)
    finally:
        sys.path.remove(str(GOLDEN))


@pytest.fixture
async def worker(make_app: Any, database_url: str) -> AsyncIterator[Akadze]:
    app: Akadze = make_app()
    app.include("tests.codegen.apps.wire.shipping")
    app.include("tests.codegen.apps.wire.billing")
    akadze.client.configure(database_url=database_url)
    RECEIVED.clear()
    yield app
    await akadze.client.dispose()
    RECEIVED.clear()


def worker_values() -> dict[str, dict[str, Any]]:
    line = billing.InvoiceLine(line_number=1, unit_cents=250)
    return {
        "billing.aliased": {
            "invoice": billing.Invoice(invoiceNumber="F-1", lines=[line, billing.InvoiceLine(2, 50)]),
            "line": line,
            "lines": [line],
        },
        "ship.parcel": {
            "to": shipping.Address(street="Main 1", zip_code="1011", nr=5, city="Amsterdam"),
            "options": shipping.Options(must=None),
            "pet": shapes.Dog(good=True),
            "cost": shapes.Money(cents=1),
            "required_none": None,
        },
    }


def client_values(wire: Any) -> dict[str, dict[str, Any]]:
    b, s = wire.billing, wire.shipping
    line = b.InvoiceLine(line_number=1, unit_cents=250)
    return {
        "billing.aliased": {
            "invoice": b.Invoice(
                invoice_number="F-1", lines=[line, b.InvoiceLine(line_number=2, unit_cents=50)]
            ),
            "line": line,
            "lines": [line],
        },
        "ship.parcel": {
            "to": s.ShippingAddress(
                street="Main 1", zip_code="1011", house_number=5, city="Amsterdam", country="NL"
            ),
            "options": s.Options(must=None, maybe=None, five=5, tags=[]),
            "pet": s.Dog(good=True),
            "cost": s.Money(cents=1, currency="EUR"),
            "required_none": None,
        },
    }


async def test_both_sides_store_the_same_row_and_it_runs(
    wire: Any, worker: Akadze, database_url: str
) -> None:
    clients = {"billing.aliased": wire.billing.billing_aliased, "ship.parcel": wire.shipping.ship_parcel}
    ours = {name: await worker.tasks[name].enqueue(**values) for name, values in worker_values().items()}
    theirs = {name: await clients[name].enqueue(**values) for name, values in client_values(wire).items()}
    query = "SELECT args::text AS args, args_fp FROM akadze_jobs WHERE id = $1"
    for name in clients:
        (mine,) = await fetch(database_url, query, ours[name].id)
        (other,) = await fetch(database_url, query, theirs[name].id)
        assert json.loads(mine["args"]) == json.loads(other["args"]), name
        assert mine["args_fp"] == other["args_fp"]
    (row,) = await fetch(database_url, query, ours["billing.aliased"].id)
    stored = json.loads(row["args"])
    assert stored["invoice"] == {
        "invoiceNumber": "F-1",
        "lines": [{"lineNumber": 1, "unitCents": 250}, {"lineNumber": 2, "unitCents": 50}],
    }  # validation keys, no computed total
    assert stored["line"] == {"lineNumber": 1, "unitCents": 250}
    await drain(worker)
    states = await fetch(database_url, "SELECT state FROM akadze_jobs")
    assert {r["state"] for r in states} == {"succeeded"}
    runs = [(name, args) for name, args in RECEIVED if name == "billing.aliased"]
    assert len(runs) == 2 and runs[0][1] == runs[1][1]
    assert runs[0][1]["invoice"].total_cents == 300
