"""A worker app whose tasks are registered every way akadze allows."""

from __future__ import annotations

import os

from akadze import Akadze

app = Akadze(database_url=os.environ.get("AKADZE_DATABASE_URL", "postgresql://localhost/codegen"))
app.include("tests.codegen.apps.registration.mail")
app.include("tests.codegen.apps.registration.billing")


# case 1: a plain def outside any include lands in __init__.py
@app.task("ping")
def ping(n: int = 1) -> int:
    return n


# case 13: a task named like a keyword, and one that shadows a builtin at module level
@app.task("import")
async def import_(path: str) -> None:
    return None


@app.task("list")
async def list_(items: list[str], limit: int | None = None) -> None:
    return None
