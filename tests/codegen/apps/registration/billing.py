"""Case 1: a synchronous task gives the same kind of stub as an async one."""

from __future__ import annotations

from akadze import Akadze


def register(app: Akadze) -> None:
    @app.task("billing.charge", queue="billing")
    def charge(account: str, cents: int) -> None:
        return None
