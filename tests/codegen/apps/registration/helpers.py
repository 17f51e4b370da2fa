"""Functions defined outside the module that registers them (case 3)."""

from __future__ import annotations


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
