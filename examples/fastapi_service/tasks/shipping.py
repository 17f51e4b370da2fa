"""Shipping a charged order; the tracking code is the job's result."""

from __future__ import annotations

from sqlalchemy import update

from akadze import Akadze, current
from examples.fastapi_service.models import Order


def register(app: Akadze) -> None:
    @app.task("orders.ship", queue="orders")
    async def ship(order_id: int) -> str:
        tracking = f"TRK-{order_id:06d}"
        async with current().complete_tx() as conn:
            await conn.execute(
                update(Order).where(Order.id == order_id).values(status="shipped", tracking=tracking)
            )
        return tracking
