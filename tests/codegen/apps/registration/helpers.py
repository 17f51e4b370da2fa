"""Functions defined outside the module that registers them (case 3)."""

from __future__ import annotations

from datetime import date
from typing import Any

#: what the partial and callable-instance tasks received: (task, the arguments of the run)
RECEIVED: list[tuple[str, dict[str, Any]]] = []


async def notify(user_id: int, message: str = "hi") -> None:
    return None


def make_sender(lang: str):  # type: ignore[no-untyped-def]
    """A factory: each call makes a new task function (case 4)."""

    async def send(user_id: int, subject: str) -> str:
        return f"{lang}:{user_id}:{subject}"

    return send


class Mailer:
    """A bound method is a task; self is not an argument (case 6)."""

    def __init__(self, sender: str) -> None:
        self.sender = sender

    async def bounce(self, message_id: str, permanent: bool = False) -> None:
        return None


# registered as functools.partial objects, the tenant bound (case 5)
async def greet(tenant: str, user_id: int, on: date, loud: bool = False) -> None:
    """Greet a user on behalf of a tenant."""
    RECEIVED.append(("greet", {"tenant": tenant, "user_id": user_id, "on": on, "loud": loud}))


class Greeter:
    """A callable instance is a task: neither self nor what __init__ took is an argument (case 6)."""

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant

    async def __call__(self, user_id: int, on: date, loud: bool = False) -> None:
        """Greet a user on behalf of this greeter's tenant."""
        RECEIVED.append(("greeter", {"tenant": self.tenant, "user_id": user_id, "on": on, "loud": loud}))
