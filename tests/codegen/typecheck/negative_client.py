"""Wrong calls to generated clients; mypy (and pyright) must reject each one, naming it.

Checked with ``mypy --strict`` by test_codegen_typing.py against the snapshots beside this file
(regenerate with ``python -m tests.codegen.typecheck``). Never imported at run time.
"""

from __future__ import annotations

from datetime import date

from registration import mail
from sqlalchemy.ext.asyncio import AsyncConnection
from wire import kinds, shipping

from tests.codegen.apps.wire import shipping as worker_shipping


async def wrong_calls(conn: AsyncConnection) -> None:
    to = shipping.ShippingAddress(street="Main 1", zip_code="1000", house_number=1, city="Ams")
    cost = shipping.Money(cents=100)
    options = shipping.Options(must=None)
    # a misspelled argument
    await mail.mail_notify.enqueue(user_idd=5)
    # a wrong type
    await mail.mail_notify.enqueue(user_id="5")
    # a missing required argument
    await mail.mail_notify.enqueue(message="hello")
    # a positional argument
    await mail.mail_notify.enqueue(5)
    # a value outside a Literal
    await kinds.kinds_enums.enqueue(
        color=kinds.Color.RED,
        level=kinds.Level.LOW,
        mode=kinds.Mode.DASHED,
        perm=kinds.Perm.READ,
        red=kinds.Color.GREEN,
        any_of="b",
    )
    # a missing await
    mail.mail_notify.enqueue(user_id=5)
    # a bad using() option
    await mail.mail_notify.using(session=conn, delay=5).enqueue(user_id=5)
    await mail.mail_notify.using(sesion=conn).enqueue(user_id=5)
    # the worker's own class instead of the mirror
    worker_to = worker_shipping.Address(street="s", zip_code="z", house_number=1, city="c")
    await shipping.ship_parcel.enqueue(
        to=worker_to, options=options, pet=shipping.Cat(), cost=cost, required_none=None
    )
    # a bad item in a batch
    await mail.mail_notify.enqueue_many([{"user_id": 1}, {"user_id": "2"}, {"message": "x"}])
    # a mirror built with a misspelled field
    shipping.Money(cent=100)
    # a NewType is not its base type
    await kinds.kinds_aliases.enqueue(user=5, ids=[], scores={}, either=None)
    await shipping.ship_parcel.enqueue(
        to=to, options=options, pet=shipping.Dog(), cost=cost, required_none=1, five="5"
    )
    # an argument that a functools.partial binds on the worker is not the producer's to pass
    await mail.mail_greet_keyword.enqueue(user_id=1, on=date(2026, 1, 1), tenant="other")
