"""The other Address (case 21), and Money shared with shipping."""

from __future__ import annotations

from pydantic import BaseModel

from akadze import Akadze

from .received import RECEIVED
from .shapes import Money


class Address(BaseModel):
    iban: str
    holder: str


def register(app: Akadze) -> None:
    @app.task("billing.invoice", queue="billing")
    async def invoice(bill_to: Address, amount: Money) -> None:
        RECEIVED.append(("billing.invoice", {"bill_to": bill_to, "amount": amount}))
