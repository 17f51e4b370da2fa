"""Tasks of the TypeScript client tests: a call made from Python and from Node must store the
same row (tests/codegen/test_codegen_typescript_rows.py); wrong calls to them are tsc errors
(tests/codegen/ts/negative.ts)."""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import uuid
from typing import Annotated, Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from akadze import Akadze, Unique


class Color(enum.StrEnum):
    RED = "red"
    GREEN = "green"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 10


class Address(BaseModel):
    model_config = ConfigDict(extra="forbid")

    street: str
    zip_code: str = Field(alias="zipCode", min_length=4)
    country: str = "NL"


class Card(BaseModel):
    kind: Literal["card"] = "card"
    last4: Annotated[str, Field(pattern=r"^[0-9]{4}$")]


class Transfer(BaseModel):
    kind: Literal["transfer"] = "transfer"
    iban: str


class Parcel(BaseModel):
    model_config = ConfigDict(val_json_bytes="base64", ser_json_bytes="base64")

    weight: Annotated[decimal.Decimal, Field(gt=0, max_digits=6, decimal_places=2)]
    label: bytes = b""


class Postcode(BaseModel):
    code: str

    @pydantic.field_validator("code")
    @classmethod
    def dutch(cls, value: str) -> str:
        if not value.endswith("NL"):
            raise ValueError("not a Dutch postcode")
        return value


class Receipt(pydantic.BaseModel):
    order_id: int
    lines: list[str]


def register(app: Akadze) -> None:
    @app.task("orders.place", queue="orders", max_attempts=4, priority=2)
    async def place(
        order_id: int,
        to: Address,
        payment: Annotated[Card | Transfer, Field(discriminator="kind")],
        parcel: Parcel,
        color: Color,
        priority: Priority = Priority.LOW,
        at: dt.datetime | None = None,
        on: dt.date | None = None,
        ref: uuid.UUID | None = None,
        within: dt.timedelta | None = None,
        tags: list[str] | None = None,
        counts: dict[str, int] | None = None,
        ratio: float = 1.0,
        note: str | None = None,
    ) -> dict[str, int]:
        """Place an order."""
        return {"order_id": order_id}

    @app.task("orders.remind", queue="orders", unique=Unique(args=["order_id"], period=dt.timedelta(hours=1)))
    async def remind(order_id: int, text: str = "") -> None: ...

    @app.task("orders.stats", queue="orders")
    async def stats(ids: pydantic.Json[list[int]], post: Postcode, due: pydantic.FutureDate) -> Receipt:
        return Receipt(order_id=1, lines=[])
