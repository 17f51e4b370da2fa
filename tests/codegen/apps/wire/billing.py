"""The other Address (case 21), Money shared with shipping, and models whose serialization
keys differ from their validation keys (issue 18.1)."""

from __future__ import annotations

from pydantic import AliasGenerator, BaseModel, ConfigDict, computed_field
from pydantic.alias_generators import to_camel, to_pascal
from pydantic.dataclasses import dataclass as pydantic_dataclass

from akadze import Akadze

from .received import RECEIVED
from .shapes import Money


class Address(BaseModel):
    iban: str
    holder: str


@pydantic_dataclass(config=ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid"))
class InvoiceLine:
    """A dataclass read under camelCase keys (msgspec alone would write its field names)."""

    line_number: int
    unit_cents: int


class Invoice(BaseModel):
    """Read under camelCase keys, serialized under PascalCase ones, with a computed field."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=AliasGenerator(validation_alias=to_camel, serialization_alias=to_pascal),
    )

    invoice_number: str
    lines: list[InvoiceLine]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total_cents(self) -> int:
        return sum(line.unit_cents for line in self.lines)


def register(app: Akadze) -> None:
    @app.task("billing.invoice", queue="billing")
    async def invoice(bill_to: Address, amount: Money) -> None:
        RECEIVED.append(("billing.invoice", {"bill_to": bill_to, "amount": amount}))

    @app.task("billing.aliased", queue="billing")
    async def aliased(invoice: Invoice, line: InvoiceLine, lines: list[InvoiceLine]) -> None:
        RECEIVED.append(("billing.aliased", {"invoice": invoice, "line": line, "lines": lines}))
