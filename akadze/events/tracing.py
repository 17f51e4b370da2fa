"""OpenTelemetry traces (``pip install 'akadze[otel]'``): a producer span per enqueue whose W3C
trace context is stored on the job, and a consumer span per run in that trace.

On as soon as the process has a tracer provider set (``opentelemetry.trace.set_tracer_provider``),
or after :func:`enable`; :func:`disable` turns it off for good. Until then nothing here imports
opentelemetry: the enqueue path checks one tuple and one ``sys.modules`` key, the run path the
same key. A run's span is current while the task runs (a job enqueued by the task, in
``complete_tx`` or not, is a child of it), and ends when the run's outcome is committed, from
the events seam (akadze/events/__init__.py), with the outcome. The SDK's span behind it is made when
the run first asks for it, or else on the events thread at the end, dated from the run's
start: the event loop pays the SDK only for runs that use their span. Span names, attributes
and the trace's shape: docs/operations.md; what it costs: docs/performance.md.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from akadze.events import Event, Events, Kind, Need, observe, trace_context
from akadze.outcomes import ErrorType, Verdict

if TYPE_CHECKING:
    from akadze.db.queries import NewJobs
    from akadze.job import Job

#: the instrumentation scope of akadze's spans
SCOPE = "akadze"
#: messaging.system of every span
SYSTEM = "akadze"
#: consumer spans still open (their outcome not committed yet) at most; past it the oldest ends
MAX_OPEN = 10_000

_OTEL = "opentelemetry.trace"


class _State:
    on = False
    off = False
    tracer: Any = None
    propagator: Any = None
    #: opentelemetry.trace and opentelemetry.context, once enabled (no import per span)
    trace: Any = None
    context: Any = None
    undo_watch: Any = None
    #: (job id, run) -> the run's open consumer span (a _RunSpan)
    open: dict[tuple[int, int], Any] = {}
    #: the last stored context read, its parent Context and whether it was sampled (_parent_of)
    last_parent: tuple[str, Any, bool] = ("", None, True)
    #: the consumer span's class (a subclass of the API's Span, made once enabled)
    run_span: Any = None


_state = _State()
_lock = threading.Lock()


def wanted() -> bool:
    """Whether spans are recorded now; turns tracing on the first time a tracer provider is
    found set. Cheap when off: one attribute and one ``sys.modules`` lookup."""
    if _state.on:
        return True
    if _state.off:
        return False
    trace = sys.modules.get(_OTEL)
    if trace is None:
        return False
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return False
    enable()
    return True


def _turned_on() -> bool:
    """An enqueue probe (akadze.events.observe): whether tracing turns itself on now (a tracer
    provider was set since), which installs its enqueue watcher."""
    return _OTEL in sys.modules and not _state.off and not _state.on and wanted()


observe.probe_enqueue(_turned_on)


def attach(events: Events) -> Callable[[], None]:
    """Subscribe the end of runs' spans to ``events`` (an app's): it takes the ends of runs
    with an open span while tracing is on, and nothing otherwise."""
    return events.subscribe(_end_runs, kinds=_END_KINDS, accept=_is_open, interest=_interest)


def _interest() -> Need:
    return Need.SOME if _state.on else Need.NOTHING


def enable(tracer_provider: Any = None) -> None:
    """Record akadze's spans with ``tracer_provider`` (the global one when None, even if it
    is set later). Raises ConfigError when opentelemetry-api is missing."""
    from akadze.errors import ConfigError

    try:
        from opentelemetry import context, trace
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        raise ConfigError("tracing needs opentelemetry-api: pip install 'akadze[otel]'") from None
    from importlib.metadata import version

    with _lock:
        _state.tracer = trace.get_tracer(SCOPE, version("akadze"), tracer_provider=tracer_provider)
        _state.propagator = TraceContextTextMapPropagator()
        _state.trace = trace
        _state.context = context
        if _state.run_span is None:
            _state.run_span = _run_span_class(trace.Span, trace.INVALID_SPAN)
        _state.off = False
        if not _state.on:
            _state.undo_watch = observe.watch_enqueue(_Producer)
        _state.on = True


def disable() -> None:
    """Record no more spans, even with a tracer provider set (until :func:`enable`)."""
    with _lock:
        if _state.undo_watch is not None:
            _state.undo_watch()
            _state.undo_watch = None
        _state.on = False
        _state.off = True


# -- producer: one span per enqueue call ---------------------------------------------------------


def _attributes(operation: str, task: str, queue: str) -> dict[str, Any]:
    """The attributes a span of ``operation`` (send, process) on a job of ``task`` starts with."""
    return {
        "messaging.system": SYSTEM,
        "messaging.operation.type": operation,
        "messaging.destination.name": queue,
        "akadze.task": task,
        "akadze.queue": queue,
    }


class _Producer:
    """A producer span around one insert (one job, or a batch); its context goes on the rows."""

    __slots__ = ("new", "span")

    def __init__(self, new: NewJobs, count: int) -> None:
        trace = _state.trace
        attributes = _attributes("send", new.task, new.queue)
        if count != 1:
            attributes["messaging.batch.message_count"] = count
        self.span = span = _state.tracer.start_span(
            f"send {new.task}", kind=trace.SpanKind.PRODUCER, attributes=attributes
        )
        stored = trace_context.carrier(_state.trace, _state.propagator, span.get_span_context())
        self.new = msgspec.structs.replace(new, trace_context=stored) if stored is not None else new

    def done(self, jobs: Sequence[Job] | None, error: BaseException | None) -> None:
        span = self.span
        if error is not None:
            from opentelemetry.trace import Status, StatusCode

            span.set_attribute("error.type", _qualified(error))
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))
        elif jobs is not None and len(jobs) == 1:
            span.set_attribute("messaging.message.id", str(jobs[0].id))
            span.set_attribute("akadze.job.id", jobs[0].id)
        span.end()


# -- consumer: one span per run --------------------------------------------------------------------


def start_run(job: Job) -> Any:
    """Open the run's consumer span, child of the enqueuing span, and make it current in this
    context (the run's task). Returns the token for :func:`leave_run`, or None when tracing is
    off. The span ends when the run's outcome is committed (events).

    The span is a :class:`_RunSpan`: the SDK's span is made the first time anything asks for
    it during the run (a child span, an enqueue, ``get_current_span().set_attribute``), or
    else by the events thread as the run's outcome is committed, with the run's start time.
    A run that makes no span of its own costs the event loop no SDK work.
    """
    if not (_state.on or wanted()):
        return None
    trace = _state.trace
    parent, sampled = _parent_of(job.trace_context)
    if not sampled:
        # the producer's trace was not sampled: nor is the run (as the SDK's default
        # sampler, ParentBased, decides); its context is current for propagation only
        return _state.context.attach(parent)
    span = _state.run_span(job, parent, time.time_ns())
    opened = _state.open
    if len(opened) >= MAX_OPEN:
        # outcomes that never came back (fenced out, events dropped): end the oldest
        stale = opened.pop(next(iter(opened)), None)
        if stale is not None:
            stale.real({"akadze.outcome": "unknown"}).end()
    opened[(job.id, job.run)] = span
    return _state.context.attach(trace.set_span_in_context(span))


def leave_run(token: Any) -> None:
    """Make the context before :func:`start_run` current again (the span stays open)."""
    if token is not None:
        _state.context.detach(token)


def _run_span_class(api_span: type, making: Any) -> Any:
    """The consumer span class, a subclass of opentelemetry's API Span (imported by now);
    ``making`` stands for a span being made (the API's invalid span)."""

    class _RunSpan(api_span):  # type: ignore[misc]
        """A run's consumer span that makes the SDK's span when first needed: every method of
        the API's Span hands over to it. Thread-safe: made once, under a lock."""

        __slots__ = ("job", "parent", "span", "start")

        def __init__(self, job: Job, parent: Any, start: int) -> None:
            #: the run's job as claimed (its task, queue, id and attempt name the span)
            self.job = job
            #: the parent Context read from the job's stored trace context at the run's start
            self.parent = parent
            self.start = start
            self.span: Any = None

        def real(self, more: dict[str, Any] | None = None) -> Any:
            """The SDK's span, made now if it was not yet (with ``more`` attributes then).

            While it is being made, a call from the same thread (a span processor's
            ``on_start`` reading the current span) gets the invalid span instead of waiting
            for itself; another thread waits for it."""
            span = self.span
            if span is not None and span is not making:
                if more:
                    span.set_attributes(more)
                return span
            with _made:
                if self.span is None:
                    self.span = making
                    job = self.job
                    attributes = _attributes("process", job.task, job.queue)
                    attributes["akadze.job.id"] = job.id
                    attributes["akadze.attempt"] = job.attempt
                    if more:
                        attributes.update(more)
                        more = None
                    try:
                        self.span = _state.tracer.start_span(
                            f"process {job.task}",
                            context=self.parent,
                            kind=_state.trace.SpanKind.CONSUMER,
                            attributes=attributes,
                            start_time=self.start,
                        )
                    except BaseException:
                        self.span = None
                        raise
            if more:
                self.span.set_attributes(more)
            return self.span

        def get_span_context(self) -> Any:
            return self.real().get_span_context()

        def is_recording(self) -> bool:
            return bool(self.real().is_recording())

        def set_attribute(self, key: str, value: Any) -> None:
            self.real().set_attribute(key, value)

        def set_attributes(self, attributes: Any) -> None:
            self.real().set_attributes(attributes)

        def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
            self.real().add_event(name, attributes, timestamp)

        def add_link(self, context: Any, attributes: Any = None) -> None:
            self.real().add_link(context, attributes)

        def update_name(self, name: str) -> None:
            self.real().update_name(name)

        def set_status(self, status: Any, description: str | None = None) -> None:
            self.real().set_status(status, description)

        def record_exception(
            self,
            exception: BaseException,
            attributes: Any = None,
            timestamp: int | None = None,
            escaped: bool = False,
        ) -> None:
            self.real().record_exception(exception, attributes, timestamp, escaped)

        def end(self, end_time: int | None = None) -> None:
            self.real().end(end_time)

        def __getattr__(self, name: str) -> Any:
            # what the API's Span does not declare (the SDK span's name, attributes, context...)
            return getattr(self.real(), name)

    return _RunSpan


#: the lock under which a run's SDK span is made (once, by the run or by the events thread);
#: reentrant: the SDK calls the span processors' on_start while it is held
_made = threading.RLock()


def _parent_of(stored: str | None) -> tuple[Any, bool]:
    """The parent Context of a run whose job stored ``stored`` (None when there is none or it
    cannot be read), and whether its span was sampled. The jobs of one enqueue_many share one
    producer span, so the last one read is kept (one tuple, swapped whole)."""
    if not stored:
        return None, True
    last = _state.last_parent
    if last[0] == stored:
        return last[1], last[2]
    parent = trace_context.parent(_state.trace, _state.propagator, stored)
    sampled = parent is None or trace_context.sampled(_state.trace, parent)
    _state.last_parent = (stored, parent, sampled)
    return parent, sampled


#: the events that end a run's span
_END_KINDS = (Kind.ENDED, Kind.COMMITTED)


def _is_open(event: Event) -> bool:
    """Whether the run of ``event`` has an open span (an events filter: the runs of a trace
    that was not sampled have none, and their events are not even queued for tracing)."""
    return (event.job_id, event.run) in _state.open


def _end_runs(event: Event) -> None:
    """Events subscriber: end a run's span once its outcome is committed, with the outcome."""
    opened = _state.open.pop((event.job_id, event.run), None)
    if opened is None:
        return
    outcome = event.outcome
    ended: dict[str, Any] = {"akadze.outcome": outcome.value if outcome is not None else "unknown"}
    if event.attempt != opened.job.attempt:  # a run stopped by a shutdown gives its attempt back
        ended["akadze.attempt"] = event.attempt
    if event.error_type is not None:
        ended["error.type"] = event.error_type
    # the SDK's span, made here (with every attribute in one call) if the run never asked for it
    span = opened.real(ended)
    failed = outcome is Verdict.FAILED or (outcome is Verdict.RETRIED and event.error_type != ErrorType.RETRY)
    if failed:
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, event.error_type or "failed"))
    span.end(end_time=int(event.at * 1e9))


def _qualified(error: BaseException) -> str:
    cls = type(error)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
