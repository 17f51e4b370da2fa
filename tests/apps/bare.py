"""An app built with ``Akadze()`` alone, as docs/install.md writes it: its database is
AKADZE_DATABASE_URL (or the worker's --database-url) when the module is imported."""

from __future__ import annotations

from akadze import Akadze

app = Akadze()


@app.task("bare.double")
async def double(n: int) -> int:
    return 2 * n
