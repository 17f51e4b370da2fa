"""``akadze_workflow_steps_total{task,queue,transition}``: the workflow steps this process saw
released (their last parent ended) or cancelled because a step they waited for did not succeed
(``dependency_failed``), a tally of the events seam like the run metrics (events/metrics.py
imports prometheus_client; this module only when it is called)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from akadze.events.kinds import Event, Kind
from akadze.outcomes import ErrorType

if TYPE_CHECKING:
    from akadze.app import Akadze

#: the events this tally takes
STEP_KINDS = (Kind.RELEASED, Kind.CANCELLED)


class StepMetrics:
    """A tally of workflow transitions in plain counters, read by a collector at scrape time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: (task, queue, transition) -> (count, first seen)
        self._counts: dict[tuple[str, str, str], tuple[int, float]] = {}

    def __call__(self, events: Sequence[Event]) -> None:
        with self._lock:
            for event in events:
                if event.kind is Kind.RELEASED:
                    transition = "released"
                elif event.error_type == ErrorType.DEPENDENCY_FAILED:
                    transition = "dependency_failed"
                else:
                    continue  # a cancel of a job that is no step's dependent
                key = (event.task, event.queue, transition)
                count, created = self._counts.get(key, (0, time.time()))
                self._counts[key] = (count + 1, created)

    def describe(self) -> Iterator[Any]:
        """Nothing: registered without a first read."""
        return iter(())

    def collect(self) -> Iterator[Any]:
        """The counter family, read under the lock."""
        from prometheus_client.core import CounterMetricFamily

        with self._lock:
            counts = dict(self._counts)
        family = CounterMetricFamily(
            "akadze_workflow_steps",
            "Workflow steps released (their last parent ended), or cancelled by a parent that failed.",
            labels=["task", "queue", "transition"],
        )
        for key, (count, created) in sorted(counts.items()):
            family.add_metric(list(key), count, created=created)
        yield family


def instrument(app: Akadze, registry: Any) -> Callable[[], None]:
    """Count ``app``'s workflow transitions in ``registry``; returns the function that stops."""
    metrics = StepMetrics()
    registry.register(metrics)
    return app.events.tally(metrics, kinds=STEP_KINDS)
