"""Loads db/sql/*.sql once and keeps each statement in both placeholder forms.

The files use named parameters (``:name``), which SQLAlchemy's ``text()`` takes as they are;
the raw asyncpg form replaces them with ``$n`` once, here, at load. Only whole-line ``--``
comments are allowed in the files (they are dropped before the parameters are read).
"""

from __future__ import annotations

import importlib.resources
import re
from dataclasses import dataclass
from functools import cache

from sqlalchemy import TextClause, text

_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")

#: NOTIFY channel of ready jobs (payload: the queue's name); workers LISTEN on it
JOBS_CHANNEL = "akadze_jobs"
#: NOTIFY channel of finished jobs someone waits for (payload: the job's id); app.wait_for
DONE_CHANNEL = "akadze_done"


@dataclass(frozen=True, slots=True)
class Statement:
    name: str
    #: the file's SQL without comments, with :name parameters
    source: str
    #: for SQLAlchemy connections
    clause: TextClause
    #: for raw asyncpg connections: $1, $2... in the order of ``params``
    pg: str
    params: tuple[str, ...]


def parse(name: str, raw: str) -> Statement:
    body = "\n".join(line for line in raw.splitlines() if not line.lstrip().startswith("--"))
    body = body.strip()
    order: list[str] = []

    def number(match: re.Match[str]) -> str:
        param = match[1]
        if param not in order:
            order.append(param)
        return f"${order.index(param) + 1}"

    pg = _PARAM.sub(number, body)
    return Statement(name, body, text(body), pg, tuple(order))


@cache
def statements() -> dict[str, Statement]:
    folder = importlib.resources.files("akadze.db") / "sql"
    found = {}
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            name = entry.name.removesuffix(".sql")
            found[name] = parse(name, entry.read_text(encoding="utf-8"))
    return found


def statement(name: str) -> Statement:
    return statements()[name]
