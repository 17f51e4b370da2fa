"""Charging an order: the order row, the next step and the job's outcome commit together."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from akadze import Akadze, current
from examples.fastapi_service.models import Order


def register(app: Akadze) -> None:
    @app.task("orders.charge", queue="orders", max_attempts=5)
    async def charge(order_id: int) -> None:
        # imported here: the clients are generated from this app, so they cannot be imported
        # while codegen loads it the first time
        from examples.fastapi_service.clients import shipping

        async with current().complete_tx() as conn:
            # the ORM on the block's connection: its writes join the block's transaction
            session = AsyncSession(bind=conn)
            order = await session.get(Order, order_id, with_for_update=True)
            if order is None:
                return  # the order was deleted meanwhile: nothing to charge
            order.status = "charged"
            await session.flush()
            # the next step exists only if this one succeeded: typed by the generated client
            await shipping.orders_ship.using(session=conn).enqueue(order_id=order_id)
