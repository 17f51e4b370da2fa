"""Enqueue under Unique: fold a batch's duplicates, insert, and send again what a race hid.

The unique index decides (db/sql/enqueue_unique.sql); this module only maps its answers back
to the items, in order. An item the database answered with no row met a conflicting job that
committed after the statement's snapshot: the next statement sees it (or inserts, if it has
already left its blocking states), so the loop ends within a few rounds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from akadze.db.queries import NewJobs, Queries
from akadze.errors import UniqueRaceError
from akadze.flow import unique_key
from akadze.job import Job

#: statements sent for the same items before giving up (each round needs a new race to lose)
MAX_ROUNDS = 10


async def insert_unique(conn: Any, new: NewJobs, payloads: Sequence[str]) -> list[Job]:
    """One job per item, in order: the new job, or the job its key already has (duplicate=True).

    Items of one batch with the same key make one job: the first item gets it as inserted (or
    as the existing duplicate), the others as duplicates of it.
    """
    unique = new.unique
    assert unique is not None
    keys = [unique_key(new.task, unique, payload) for payload in payloads]
    first: dict[str, int] = {}
    for position, key in enumerate(keys):
        first.setdefault(key, position)
    found: dict[str, Job] = {}
    # in the order of the keys, whatever the items' order: two batches racing for the same keys
    # then wait for each other's rows in one order, never in a cycle (a deadlock, seen when
    # twenty batches of the same three keys in rotated orders raced)
    pending = sorted(first.items())
    for _ in range(MAX_ROUNDS):
        answered = await Queries.enqueue_unique(
            conn, new, [payloads[position] for _, position in pending], [key for key, _ in pending]
        )
        for index, job in answered.items():
            found[pending[index][0]] = job
        pending = [(key, position) for key, position in pending if key not in found]
        if not pending:
            break
    else:
        raise UniqueRaceError(new.task, MAX_ROUNDS)
    jobs = []
    for position, key in enumerate(keys):
        job = found[key]
        if position != first[key] and not job.duplicate:
            job = msgspec.structs.replace(job, duplicate=True)
        jobs.append(job)
    return jobs
