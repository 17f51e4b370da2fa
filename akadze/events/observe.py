"""Watchers of the enqueue path, for akadze.events.metrics and akadze.events.tracing: none
unless one was enabled (:func:`watching` decides, cheaply). Imports nothing.

A watcher is called with the insert's NewJobs and its number of jobs before the statement runs;
it returns a :class:`Watching` whose ``new`` the insert uses (tracing adds its trace context)
and whose ``done(jobs, error)`` is called once the statement returned or raised.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

if TYPE_CHECKING:
    from akadze.db.queries import NewJobs
    from akadze.job import Job


class Watching(Protocol):
    """A watcher's hold on one insert: ``new`` is what the insert writes (tracing's watcher adds
    its trace context), and ``done`` follows the statement."""

    new: NewJobs

    def done(self, jobs: Sequence[Job] | None, error: BaseException | None) -> None:
        """Called once, with the inserted ``jobs`` or the ``error`` the insert raised. It must not
        raise: its error would reach the enqueue's caller, though the insert may have committed."""


#: a watcher: (new jobs' options, how many jobs) -> what it watches
EnqueueWatcher: TypeAlias = Callable[["NewJobs", int], Watching]

#: the enabled watchers, in order (a tuple: replaced whole, read without a lock)
enqueue_watchers: tuple[EnqueueWatcher, ...] = ()
#: checks that may enable a watcher when no watcher is (tracing: a tracer provider set since)
_probes: tuple[Callable[[], bool], ...] = ()


def probe_enqueue(probe: Callable[[], bool]) -> None:
    """Call ``probe()`` at each insert while no watcher is enabled: it may enable one (and say
    so by returning True). It must be cheap: it runs on every enqueue of a process without
    metrics or traces."""
    global _probes
    _probes = (*_probes, probe)


def watching() -> bool:
    """Whether an insert goes through :func:`watched`: a watcher is enabled, or a probe enabled
    one now."""
    return bool(enqueue_watchers) or (any(probe() for probe in _probes) and bool(enqueue_watchers))


def watch_enqueue(watcher: EnqueueWatcher) -> Callable[[], None]:
    """Call ``watcher`` around every insert of jobs in this process. Returns the undo function."""
    global enqueue_watchers
    enqueue_watchers = (*enqueue_watchers, watcher)

    def undo() -> None:
        global enqueue_watchers
        enqueue_watchers = tuple(w for w in enqueue_watchers if w is not watcher)

    return undo


async def watched(
    insert: Callable[[Any, NewJobs, Sequence[str], Any], Awaitable[list[Job]]],
    conn: Any,
    new: NewJobs,
    payloads: Sequence[str],
    hooks: Any,
) -> list[Job]:
    """Run ``insert`` with every enabled watcher around it."""
    active: list[Watching] = []
    for watcher in enqueue_watchers:
        current = watcher(new, len(payloads))
        new = current.new
        active.append(current)
    try:
        jobs = await insert(conn, new, payloads, hooks)
    except BaseException as exc:
        for current in reversed(active):
            current.done(None, exc)
        raise
    for current in reversed(active):
        current.done(jobs, None)
    return jobs
