"""The delivery of events: the subscriptions, the bounded queue, and the events thread.

``publish`` never blocks and never raises; a subscriber that raises is logged and skipped, a
slow one lets the queue fill and later events are dropped (counted and logged). Each
subscription says, through its own cheap ``interest`` check, what it takes now, so that the
publisher builds no event that nobody takes (:meth:`Events.need`).
"""

from __future__ import annotations

import collections
import inspect
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence

from akadze.errors import ConfigError
from akadze.events.kinds import Accept, Event, Interest, Kind, Need, Subscriber, Tally, has_error

logger = logging.getLogger("akadze.events")

#: events waiting for the subscribers; past this, new events are dropped and counted
MAX_QUEUED = 10_000
#: how long the events thread lets events gather after a wake-up (the delivery latency)
GATHER_S = 0.01
#: a subscriber that keeps raising, or drops that keep happening, are logged this often
LOG_EVERY_S = 60.0


class _Entry:
    """One subscription: what it takes, and how it says so now."""

    __slots__ = ("accept", "callback", "interest", "kinds")

    def __init__(
        self,
        callback: Subscriber | Tally,
        kinds: frozenset[Kind],
        accept: Accept | None,
        interest: Interest | None,
    ) -> None:
        self.callback = callback
        self.kinds = kinds
        self.accept = accept
        self.interest = interest

    def need(self) -> Need:
        """What it takes of its kinds now: what its interest says, else all that its filter
        accepts (ERRORS for the filter :func:`has_error`)."""
        if self.interest is not None:
            need = self.interest()
            return Need.ALL if need is Need.SOME and self.accept is None else need
        if self.accept is None:
            return Need.ALL
        return Need.ERRORS if self.accept is has_error else Need.SOME

    def filter(self, need: Need) -> Accept:
        """The filter of what it takes when it takes ``need`` (SOME or ERRORS)."""
        if need is Need.ERRORS:
            return has_error
        assert self.accept is not None  # need() says ALL for a subscription without a filter
        return self.accept

    def takes(self, event: Event) -> bool:
        """Whether it takes ``event`` (on the events thread, just before the delivery)."""
        need = self.need()
        return need is Need.ALL or (need is not Need.NOTHING and self.filter(need)(event))


def _kinds(kinds: Iterable[Kind] | None) -> frozenset[Kind]:
    if kinds is None:
        return frozenset(Kind)
    if not (chosen := frozenset(kinds)) or not all(isinstance(kind, Kind) for kind in chosen):
        raise ConfigError(f"kinds must be one or more akadze.events.Kind values, got {kinds!r}")
    return chosen


class Events:
    """The app's subscribers and the thread that calls them (started at the first event).

    ``publish`` never blocks and never raises. ``flush`` waits for what was published so far
    to reach every subscriber (a worker does so as it stops).
    """

    def __init__(self, *, max_queued: int = MAX_QUEUED) -> None:
        self.max_queued = max_queued
        #: events dropped because the queue was full (a slow subscriber)
        self.dropped = 0
        #: the subscriptions of the events thread, and the tallies (the publishing thread's)
        self._threaded: tuple[_Entry, ...] = ()
        self._tallies: tuple[_Entry, ...] = ()
        #: per kind, the subscriptions that take it (publish's first look-up)
        self._threaded_of: dict[Kind, tuple[_Entry, ...]] = dict.fromkeys(Kind, ())
        self._tallies_of: dict[Kind, tuple[_Entry, ...]] = dict.fromkeys(Kind, ())
        self._queue: collections.deque[Event] = collections.deque()
        self._ready = threading.Event()
        self._done = threading.Condition()
        self._published = 0
        self._delivered = 0
        self._closing = False
        self._thread: threading.Thread | None = None
        self._last_drop_log = 0.0
        self._dropped_logged = 0
        self._failures: dict[int, tuple[float, int]] = {}

    @property
    def subscribers(self) -> tuple[Subscriber, ...]:
        """The events thread's subscribers, in the order they subscribed."""
        return tuple(entry.callback for entry in self._threaded)  # type: ignore[misc]

    def subscribe(
        self,
        callback: Subscriber,
        *,
        kinds: Iterable[Kind] | None = None,
        accept: Accept | None = None,
        interest: Interest | None = None,
    ) -> Callable[[], None]:
        """Call ``callback(event)`` after every transition this process commits: of ``kinds``
        only, when given, and only those ``accept(event)`` is true of, when given (a cheap
        test, called in the publishing thread and again before the delivery); while
        ``interest()``, when given, says it takes any (a cheap check, made at every
        publication: a logger's level, a switch). What no subscriber takes is not even built.

        Returns a function that unsubscribes it. ``callback`` must be a plain function: it
        runs on the events thread (hand work to an event loop with
        ``loop.call_soon_threadsafe``).
        """
        return self._add("_threaded", callback, kinds, accept, interest)

    def tally(
        self, callback: Tally, *, kinds: Iterable[Kind] | None = None, interest: Interest | None = None
    ) -> Callable[[], None]:
        """Call ``callback(events)`` in the publishing thread, as events are published: with a
        sequence of the events of one publication (one event, or the events of a claim or of
        an outcome batch, all of one kind), only of ``kinds`` when given.

        For akadze's own in-memory aggregations (akadze.events.metrics): ``callback`` must only
        update memory, never block and never wait for a lock another thread may hold long
        (a transition publishes right after its commit, and this call is part of that). It
        may run in several threads at once, one per event loop that publishes. An exception
        is logged and skipped. Returns a function that removes it.
        """
        return self._add("_tallies", callback, kinds, None, interest)

    def _add(
        self,
        where: str,
        callback: Subscriber | Tally,
        kinds: Iterable[Kind] | None,
        accept: Accept | None,
        interest: Interest | None,
    ) -> Callable[[], None]:
        if not callable(callback) or inspect.iscoroutinefunction(callback):
            raise ConfigError(
                f"an events subscriber must be a plain (not async) function of one event, got {callback!r}"
            )
        entry = _Entry(callback, _kinds(kinds), accept, interest)
        setattr(self, where, (*getattr(self, where), entry))
        self._update()

        def remove() -> None:
            setattr(self, where, tuple(e for e in getattr(self, where) if e is not entry))
            self._update()

        return remove

    def _update(self) -> None:
        self._threaded_of = {kind: tuple(e for e in self._threaded if kind in e.kinds) for kind in Kind}
        self._tallies_of = {kind: tuple(e for e in self._tallies if kind in e.kinds) for kind in Kind}

    def need(self, kind: Kind) -> Need:
        """What the subscribers take, now, of events of ``kind``: the most any one takes
        (ERRORS: only ends with an error; build the others only for more)."""
        found = Need.NOTHING
        for entry in (*self._tallies_of[kind], *self._threaded_of[kind]):
            need = entry.need()
            if need is Need.ALL:
                return need
            if need > found:
                found = need
        return found

    def wants(self, kind: Kind) -> bool:
        """Whether an event of ``kind`` published now would reach anyone (build it only then)."""
        return self.need(kind) is not Need.NOTHING

    @property
    def active(self) -> bool:
        """Whether some event published now would reach anyone (build events only then)."""
        return any(entry.need() is not Need.NOTHING for entry in (*self._tallies, *self._threaded))

    def publish(self, event: Event) -> None:
        """Hand ``event`` to the tallies, then queue it for the events thread if a subscriber
        there takes it; drop it (counted) when the queue is full."""
        self.publish_all(event.kind, (event,))

    def publish_all(self, kind: Kind, events: Sequence[Event]) -> None:
        """:meth:`publish` for the events of one claim or one outcome batch, all of ``kind``:
        each tally takes them in one call, and the events thread's share is decided per event
        only where a subscriber takes some."""
        if not events:
            return
        for entry in self._tallies_of[kind]:
            if entry.need() is Need.NOTHING:
                continue
            try:
                entry.callback(events)  # type: ignore[arg-type]
            except Exception:
                self._log_failure(entry.callback)
        accepts: list[Accept] = []
        for entry in self._threaded_of[kind]:
            need = entry.need()
            if need is Need.ALL:
                self._enqueue(events)
                return
            if need is not Need.NOTHING:
                accepts.append(entry.filter(need))
        if len(accepts) == 1:  # one comprehension, no generator per event
            accept = accepts[0]
            self._enqueue([e for e in events if accept(e)])
        elif accepts:
            self._enqueue([e for e in events if any(a(e) for a in accepts)])

    def _enqueue(self, events: Sequence[Event]) -> None:
        """Queue ``events``, all taken by some subscriber on the events thread."""
        if not events:
            return
        queue = self._queue
        room = self.max_queued - len(queue)
        if room < len(events):
            self.dropped += len(events) - max(room, 0)
            self._log_drops()
            events = events[: max(room, 0)]
        self._published += len(events)
        queue.extend(events)
        if self._thread is None:
            self._start()
        if not self._ready.is_set():
            self._ready.set()

    def flush(self, timeout_s: float) -> bool:
        """Wait until every event published so far reached the subscribers; False on timeout."""
        target = self._published
        with self._done:
            return self._done.wait_for(lambda: self._delivered >= target, timeout_s)

    def close(self, timeout_s: float = 5.0) -> None:
        """Deliver what is queued (up to ``timeout_s``) and stop the thread."""
        self.flush(timeout_s)
        self._closing = True
        self._ready.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout_s)

    def _start(self) -> None:
        self._closing = False
        self._thread = threading.Thread(target=self._deliver, name="akadze-events", daemon=True)
        self._thread.start()

    def _deliver(self) -> None:
        queue = self._queue
        while True:
            self._ready.wait()
            if not self._closing:
                # let a batch gather: one wake-up of this thread per batch, not per event,
                # keeps it from taking the interpreter lock from the event loop at every job
                time.sleep(GATHER_S)
            self._ready.clear()
            while queue:
                delivered = 0
                while queue and delivered < 100:
                    event = queue.popleft()
                    delivered += 1
                    for entry in self._threaded_of[event.kind]:
                        if entry.takes(event):
                            try:
                                entry.callback(event)  # type: ignore[arg-type]  # a subscriber
                            except Exception:
                                self._log_failure(entry.callback)
                with self._done:
                    self._delivered += delivered
                    self._done.notify_all()
            if self._closing:
                return

    def _log_failure(self, subscriber: Subscriber | Tally) -> None:
        now = time.monotonic()
        logged_at, since = self._failures.get(id(subscriber), (float("-inf"), 0))
        if now - logged_at < LOG_EVERY_S:
            self._failures[id(subscriber)] = (logged_at, since + 1)
            return
        self._failures[id(subscriber)] = (now, 0)
        logger.exception(
            "events subscriber %s raised (skipped; %d more failures since last logged); "
            "transitions are not affected",
            getattr(subscriber, "__qualname__", subscriber),
            since,
        )

    def _log_drops(self) -> None:
        now = time.monotonic()
        if now - self._last_drop_log < LOG_EVERY_S:
            return
        self._last_drop_log = now
        logger.warning(
            "events: %d events dropped so far (%d since last logged): a subscriber is slower "
            "than the transitions; the queue holds %d",
            self.dropped,
            self.dropped - self._dropped_logged,
            self.max_queued,
        )
        self._dropped_logged = self.dropped
