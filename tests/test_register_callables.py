"""Registering a functools.partial or a callable instance: dependencies bound in advance."""

from __future__ import annotations

import functools
from datetime import date

import pydantic
import pytest

from akadze import Akadze
from akadze.errors import ConfigError
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


async def test_a_keyword_bound_argument_is_not_a_job_argument(app: Akadze) -> None:
    """Bound in advance means a dependency: a job cannot override it."""
    SEEN.clear()
    task = app.register(functools.partial(greet, tenant="acme"), name="greet.keyword")
    assert set(task.codec.signature.parameters) == {"user_id", "on"}
    with pytest.raises(pydantic.ValidationError, match="tenant"):
        await task.enqueue(user_id=1, on=date(2026, 1, 1), tenant="other")  # type: ignore[call-arg]
    await task.enqueue(user_id=2, on=date(2026, 1, 2))
    assert await drain(app) == 1
    assert SEEN == [("acme", 2, date(2026, 1, 2))]


class Opaque:
    pass


class Holder(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
    value: Opaque


async def keep(holder: Holder) -> None: ...


def test_an_argument_type_without_a_json_form_is_a_config_error(app: Akadze) -> None:
    with pytest.raises(ConfigError, match=r"'keep\.opaque': an argument type has no JSON form"):
        app.register(keep, name="keep.opaque")
