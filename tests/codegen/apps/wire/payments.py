"""Issue 18: a discriminated union whose tag has no default, constraints msgspec cannot
express, string-like types producers hold as Python objects."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from ipaddress import IPv4Address, IPv6Address
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, EmailStr, Field, IPvAnyNetwork

from akadze import Akadze

from .received import RECEIVED


class Wallet(BaseModel):
    """A variant whose tag has no default: every payment must say its kind."""

    kind: Literal["wallet"]
    iban: str = Field(pattern=r"^[A-Z]{2}[0-9]{2}")


class Card(BaseModel):
    kind: Literal["card"] = "card"
    last4: Annotated[str, Field(min_length=4, max_length=4)]


Money = Annotated[Decimal, Field(gt=0, max_digits=8, decimal_places=2)]


def register(app: Akadze) -> None:
    @app.task("payments.pay", queue="billing")
    async def pay(
        payment: Annotated[Wallet | Card, Field(discriminator="kind")],
        amount: Money,
        within: Annotated[timedelta, Field(gt=timedelta(0), le=timedelta(days=30))],
        fallback: Annotated[Wallet | Card, Field(discriminator="kind")] | None = None,
    ) -> None:
        RECEIVED.append(("payments.pay", dict(locals())))

    @app.task("payments.audit", queue="billing")
    async def audit(
        ip: IPv4Address,
        peer: IPv4Address | IPv6Address,
        network: IPvAnyNetwork,
        log: Path,
        contact: str = "",
    ) -> None:
        RECEIVED.append(("payments.audit", dict(locals())))


__all__ = ["Card", "EmailStr", "Wallet"]
