"""Registered from mail.register(app): the tasks belong to mail.py (case 8)."""

from __future__ import annotations

from akadze import Akadze


def register_more(app: Akadze) -> None:
    @app.task("mail.digest", queue="mail")
    async def digest(user_ids: list[int]) -> None:
        return None
