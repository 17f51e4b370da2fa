"""Worker code that enqueues another module's task, typed: the generated client inside
complete_tx (docs/fastapi.md). Checked by test_toolchain_typing.py; never run."""

from __future__ import annotations

from typing import reveal_type

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

import akadze.client
from akadze import Akadze, current
from examples.fastapi_service.clients import shipping

app = Akadze(database_url="postgresql://localhost/typing")


@app.task("orders.charge")
async def charge(order_id: int) -> None:
    async with current().complete_tx() as conn:
        reveal_type(conn)
        session = AsyncSession(bind=conn)
        await session.flush()
        reveal_type(await shipping.orders_ship.using(session=conn).enqueue(order_id=order_id))
        # a misspelled argument
        await shipping.orders_ship.using(session=conn).enqueue(order=order_id)
        # a wrong type
        await shipping.orders_ship.using(session=conn).enqueue(order_id=str(order_id))


async def producer(conn: AsyncConnection) -> None:
    job = await shipping.orders_ship.enqueue(order_id=1)
    reveal_type(await akadze.client.get_job(conn, job.id))
    done = await akadze.client.wait_for(job.id, timeout=5)
    reveal_type(done.state)
    reveal_type(await app.wait_for(job.id, timeout=5))
    reveal_type(current().cancel_requested)
    # the untyped way: mypy cannot catch the misspelling
    await app.get_task("orders.ship").enqueue(order=1)
