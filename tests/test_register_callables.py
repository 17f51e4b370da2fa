"""Registering a functools.partial or a callable instance: dependencies bound in advance."""

from __future__ import annotations

import functools
from datetime import date

from akadze import Akadze
from akadze.testing import drain

SEEN: list[tuple[str, int, date]] = []


async def greet(tenant: str, user_id: int, on: date) -> None:
    SEEN.append((tenant, user_id, on))


class Greeter:
    def __init__(self, tenant: str) -> None:
        self.tenant = tenant

    async def __call__(self, user_id: int, on: date) -> None:
        SEEN.append((self.tenant, user_id, on))


async def test_a_partial_and_a_callable_instance_register_and_run_with_their_types(app: Akadze) -> None:
    SEEN.clear()
    by_partial = app.register(functools.partial(greet, "acme"), name="greet.partial")
    by_instance = app.register(Greeter("globex"), name="greet.instance")
    assert set(by_partial.codec.signature.parameters) == {"user_id", "on"}
    assert set(by_instance.codec.signature.parameters) == {"user_id", "on"}
    await by_partial.enqueue(user_id=1, on="2026-11-29")
    await by_instance.enqueue(user_id=2, on=date(2026, 11, 30))
    assert await drain(app) == 2
    assert sorted(SEEN) == [("acme", 1, date(2026, 11, 29)), ("globex", 2, date(2026, 11, 30))]
