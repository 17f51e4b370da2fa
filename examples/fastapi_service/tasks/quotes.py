"""A price quote: a job whose result a request waits for."""

from __future__ import annotations

from decimal import Decimal

from akadze import Akadze

PRICES = {"book": Decimal("12.50"), "pen": Decimal("1.20")}


def register(app: Akadze) -> None:
    @app.task("quotes.price", queue="quotes", max_attempts=1)
    async def price(item: str, quantity: int) -> dict[str, str]:
        unit = PRICES.get(item)
        if unit is None:
            raise ValueError(f"no price for {item!r}")
        return {"item": item, "quantity": str(quantity), "total": str(unit * quantity)}
