"""Correct calls to generated clients: ``mypy --strict`` accepts them; reveal_type is pinned."""

from __future__ import annotations

import ipaddress
import pathlib
import uuid
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import reveal_type

from registration import mail
from sqlalchemy.ext.asyncio import AsyncConnection
from wire import kinds, payments, shipping


async def right_calls(conn: AsyncConnection) -> None:
    job = await mail.mail_notify.using(session=conn, delay=timedelta(seconds=5)).enqueue(user_id=5)
    reveal_type(job)
    reveal_type(await mail.mail_welcome_de.result_of(job))
    reveal_type(mail.mail_notify.using(session=conn))
    reveal_type(await mail.mail_notify.enqueue_many([{"user_id": 1}, {"user_id": 2, "message": "x"}]))
    await shipping.ship_pages.enqueue(
        addresses=shipping.Page(items=[]),
        numbers=shipping.Page[int](items=[1, 2]),
        box=shipping.Box(item=1),
        boxes=[shipping.Box(item="a", label="b")],
    )
    await kinds.kinds_numbers.using(priority=1, queue="other").enqueue(
        price=kinds.Price(amount=Decimal("1.50"), id=uuid.uuid4()),
        plain=Decimal(1),
        uid=uuid.uuid4(),
        positive=1,
        small=3,
        code="ABC",
    )
    await kinds.kinds_aliases.enqueue(user=kinds.UserId(5), ids=[], scores={"a": 1.0}, either="x")
    await kinds.kinds_times.using(run_at=datetime.now(UTC)).enqueue(
        blob=kinds.Blob(data=b"\x00"),
        raw=b"",
        aware=datetime.now(UTC),
        naive=datetime(2024, 1, 1),
        day=datetime.now(UTC).date(),
        at=datetime.now(UTC).time(),
        wait=timedelta(minutes=1),
        when=datetime.now(UTC),
    )
    await mail.mail_greet_positional.enqueue(user_id=1, on=date(2026, 1, 1), loud=True)
    await mail.mail_greet_keyword.enqueue(user_id=1, on=date(2026, 1, 1))
    await mail.mail_greet_instance.using(session=conn).enqueue(user_id=1, on=date(2026, 1, 1))
    # issue 18: the Python objects of string-like types, and their strings
    await payments.payments_audit.enqueue(
        ip=ipaddress.IPv4Address("10.0.0.1"),
        peer=ipaddress.IPv6Address("::1"),
        network="10.0.0.0/8",
        log=pathlib.PurePosixPath("/var/log/x"),
    )
    await payments.payments_pay.enqueue(
        payment=payments.Wallet(kind="wallet", iban="NL91ABNA"),
        amount=Decimal("12.50"),
        within=timedelta(days=1),
        fallback=payments.Card(last4="1234"),
    )
