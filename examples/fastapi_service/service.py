"""The FastAPI service: `uvicorn examples.fastapi_service.service:api`.

One engine for the whole process, opened and closed by the lifespan: request sessions and the
generated akadze clients share it. A job is enqueued in the request's transaction, so it
exists exactly when the order does. A request may wait for a job's result.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Request
from pydantic import BaseModel, Field
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker, create_async_engine

import akadze.client
from akadze.app import normalize_url
from examples.fastapi_service.clients import billing, quotes
from examples.fastapi_service.models import Base, Order

#: more than this many of an item is refused after the job was enqueued: the rollback takes both
STOCK = 100


@asynccontextmanager
async def lifespan(api: FastAPI) -> AsyncIterator[None]:
    engine = create_async_engine(normalize_url(os.environ["AKADZE_DATABASE_URL"]), pool_size=10)
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)  # Alembic's job in a real service
    akadze.client.configure(engine=engine)  # jobs enqueued without session= use it too
    api.state.sessions = async_sessionmaker(engine, expire_on_commit=False)
    try:
        yield
    finally:
        await engine.dispose()


api = FastAPI(title="shop", lifespan=lifespan)


async def session(request: Request) -> AsyncIterator[AsyncSession]:
    async with request.app.state.sessions() as opened:
        yield opened


Session = Annotated[AsyncSession, Depends(session)]


class NewOrder(BaseModel):
    item: str = Field(min_length=1)
    quantity: int = Field(gt=0)


class NewQuote(BaseModel):
    item: str
    quantity: int = Field(gt=0)


@api.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@api.post("/orders", status_code=201)
async def place_order(body: NewOrder, db: Session) -> dict[str, Any]:
    async with db.begin():
        order = Order(item=body.item, quantity=body.quantity, status="placed")
        db.add(order)
        await db.flush()
        # in the request's transaction: the job commits with the order, or neither exists
        job = await billing.orders_charge.using(session=db).enqueue(order_id=order.id)
        order.charge_job_id = job.id
        if body.quantity > STOCK:
            raise HTTPException(409, f"only {STOCK} in stock")  # rolls back the order and the job
    return {"id": order.id, "status": order.status, "job_id": job.id}


@api.get("/orders/{order_id}")
async def read_order(order_id: int, db: Session) -> dict[str, Any]:
    order = await db.get(Order, order_id)
    if order is None:
        raise HTTPException(404, "no such order")
    charge = await akadze.client.get_job(db, order.charge_job_id) if order.charge_job_id else None
    return {
        "id": order.id,
        "status": order.status,
        "tracking": order.tracking,
        "charge": charge.state if charge else None,
    }


@api.post("/quotes")
async def quote(body: NewQuote) -> dict[str, Any]:
    """Waits for the job's result: woken by a notification when it finishes, 10 s at most."""
    job = await quotes.quotes_price.enqueue(item=body.item, quantity=body.quantity)
    try:
        done = await akadze.client.wait_for(job.id, timeout=timedelta(seconds=10))
    except TimeoutError:
        raise HTTPException(504, f"quote {job.id} is still being computed") from None
    if done.state != akadze.client.JobState.SUCCEEDED:
        raise HTTPException(422, f"no quote: the job ended {done.state}")
    result: dict[str, Any] = done.result
    return result
