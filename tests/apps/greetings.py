"""A module for app.include(): its tasks are registered by register(app)."""

from __future__ import annotations

from akadze import Akadze


def register(app: Akadze) -> None:
    @app.task("greetings.hello", queue="greetings")
    async def hello(name: str) -> str:
        return f"hello {name}"
