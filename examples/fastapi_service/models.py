"""The service's own table, shared by the API (request sessions) and the worker (complete_tx).

In a real project Alembic manages it, with akadze's schema beside it (docs/schema.md); the
example creates it at start-up to stay short.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Integer, Text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "shop_orders"

    id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    item: Mapped[str] = mapped_column(Text)
    quantity: Mapped[int] = mapped_column(Integer)
    #: placed -> charged -> shipped
    status: Mapped[str] = mapped_column(Text, default="placed")
    charge_job_id: Mapped[int | None] = mapped_column(BigInteger, default=None)
    tracking: Mapped[str | None] = mapped_column(Text, default=None)
