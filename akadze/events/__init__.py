"""The events a process publishes after each job transition commits, and their delivery.

Metrics, traces, dashboards and the worker's own transition log read the system here, never
inside a transaction: ``app.subscribe(callback)`` registers a plain function that receives
every :class:`Event` (or the ``kinds`` it asks for) on one thread of its own ("akadze-events").
Publishing is a bounded queue append, and only of events a subscriber wants: a subscriber that
raises is logged and skipped, a slow one lets the queue fill and later events are dropped
(counted in ``app.events.dropped`` and logged), and a transition never waits for either.
Events carry no task arguments and no results.

akadze's own in-memory tallies (the run metrics) take theirs in the publishing thread instead
(:meth:`Events.tally`): memory updates only, so they cannot slow a transition.

kinds.py says what an event is and what a subscription takes; bus.py delivers them.

The bus knows none of its subscribers: the transition log line (events/logs.py), traces
(events/tracing.py) and metrics (events/metrics.py) attach through :meth:`Events.subscribe`
and :meth:`Events.tally` like any other, each with its own cheap check of whether it wants
events now (``interest``), so that a process builds no event nobody takes.
"""

from akadze.events.bus import Events
from akadze.events.kinds import (
    Accept,
    Event,
    Interest,
    Kind,
    Need,
    Subscriber,
    Tally,
    event_of,
    has_error,
)

__all__ = [
    "Accept",
    "Event",
    "Events",
    "Interest",
    "Kind",
    "Need",
    "Subscriber",
    "Tally",
    "event_of",
    "has_error",
]
