"""OpenTelemetry traces with the SDK's in-memory exporter: one trace from a request through
enqueue, the run and a complete_tx follow-up run; generated clients' producer spans."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any, TypedDict

import pytest
from opentelemetry import context, trace
from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from sqlalchemy import text

from akadze import Akadze, current
from akadze.client import RemoteTask
from akadze.events import tracing
from akadze.testing import drain
from tests.support import module_database, words_with_app


@pytest.fixture
def database_url(request: pytest.FixtureRequest, server_url: str, template_db: str) -> str:
    return module_database(request, server_url, template_db)


@pytest.fixture
def provider() -> Iterator[TracerProvider]:
    """A provider of the SDK with an in-memory exporter (``provider.exported``), recording
    akadze's spans (tracing.enable: the global provider can be set once per process only)."""
    exported = InMemorySpanExporter()
    made = TracerProvider()
    made.add_span_processor(SimpleSpanProcessor(exported))
    made.exported = exported  # type: ignore[attr-defined]
    tracing.enable(made)
    try:
        yield made
    finally:
        tracing.disable()
        made.shutdown()


@pytest.fixture
def exporter(provider: TracerProvider) -> InMemorySpanExporter:
    exported: InMemorySpanExporter = provider.exported  # type: ignore[attr-defined]
    return exported


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


async def flushed(app: Akadze) -> None:
    assert await asyncio.to_thread(app.events.flush, 10.0)


async def test_one_trace_from_a_request_through_enqueue_run_and_a_follow_up_run(
    app: Akadze, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    @app.task("order.ship", queue="shipping")
    async def ship(order_id: int) -> None:
        return None

    @app.task("order.pay", queue="billing")
    async def pay(order_id: int, card: str) -> dict[str, int]:
        async with current().complete_tx() as conn:
            await ship.using(session=conn).enqueue(order_id=order_id)
        return {"paid": order_id}

    request_tracer = provider.get_tracer("the-web-app")
    with request_tracer.start_as_current_span("POST /orders") as request:
        job = await pay.enqueue(order_id=7, card="SECRET-CARD")
    await drain(app)
    await flushed(app)

    spans = exporter.get_finished_spans()
    trace_id = request.get_span_context().trace_id
    assert {span.context.trace_id for span in spans} == {trace_id}, [span.name for span in spans]
    (send_pay,) = by_name(spans, "send order.pay")
    (run_pay,) = by_name(spans, "process order.pay")
    (send_ship,) = by_name(spans, "send order.ship")
    (run_ship,) = by_name(spans, "process order.ship")
    # request -> send -> process -> send (in complete_tx) -> process
    assert send_pay.parent is not None and send_pay.parent.span_id == request.get_span_context().span_id
    assert run_pay.parent is not None and run_pay.parent.span_id == send_pay.context.span_id
    assert send_ship.parent is not None and send_ship.parent.span_id == run_pay.context.span_id
    assert run_ship.parent is not None and run_ship.parent.span_id == send_ship.context.span_id

    assert send_pay.kind is SpanKind.PRODUCER and run_pay.kind is SpanKind.CONSUMER
    assert dict(send_pay.attributes or {}) == {
        "messaging.system": "akadze",
        "messaging.operation.type": "send",
        "messaging.destination.name": "billing",
        "akadze.task": "order.pay",
        "akadze.queue": "billing",
        "messaging.message.id": str(job.id),
        "akadze.job.id": job.id,
    }
    attributes = dict(run_pay.attributes or {})
    assert attributes["akadze.job.id"] == job.id
    assert (attributes["akadze.task"], attributes["akadze.queue"]) == ("order.pay", "billing")
    assert (attributes["akadze.attempt"], attributes["akadze.outcome"]) == (1, "succeeded")
    assert attributes["messaging.destination.name"] == "billing"
    assert attributes["messaging.operation.type"] == "process"
    assert dict(run_ship.attributes or {})["akadze.outcome"] == "succeeded"
    for span in spans:
        assert "SECRET" not in json.dumps(dict(span.attributes or {}))

    # the context is stored on the job, in W3C form
    stored = await app.get_job(job.id)
    assert stored is not None and stored.trace_context is not None
    traceparent = json.loads(stored.trace_context)["traceparent"]
    # flags: sampled (01), with the SDK's random-trace-id bit (02) where it sets it
    assert traceparent[:-2] == f"00-{trace_id:032x}-{send_pay.context.span_id:016x}-"
    assert int(traceparent[-2:], 16) & 1


async def test_the_run_span_is_current_recording_and_starts_when_the_run_starts(
    app: Akadze, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """The SDK's consumer span is made when the run first asks for it, or else as the outcome
    is committed (off the event loop): either way it is the run's span, from the run's start."""
    seen: dict[str, Any] = {}

    @app.task("report.make")
    async def make() -> None:
        span = trace.get_current_span()
        seen["recording"] = span.is_recording()
        seen["context"] = span.get_span_context()
        span.set_attribute("report.rows", 3)
        span.add_event("rendering")
        seen["name"] = span.name  # type: ignore[attr-defined]  # the SDK span's, handed over
        with provider.get_tracer("the-task").start_as_current_span("render"):
            pass

    @app.task("report.quiet")
    async def quiet() -> None:
        seen["quiet_ran_at"] = time.time_ns()

    await make.enqueue()
    await quiet.enqueue()
    await drain(app)
    await flushed(app)
    spans = exporter.get_finished_spans()
    (run,) = by_name(spans, "process report.make")
    (render,) = by_name(spans, "render")
    assert seen["recording"] is True and seen["context"] == run.context
    assert render.parent is not None and render.parent.span_id == run.context.span_id
    attributes = dict(run.attributes or {})
    assert (attributes["report.rows"], attributes["akadze.outcome"]) == (3, "succeeded")
    assert [event.name for event in run.events] == ["rendering"] and seen["name"] == run.name
    # a run that never asked for its span: made after the outcome's commit, dated from the run
    (run_quiet,) = by_name(spans, "process report.quiet")
    assert run_quiet.start_time is not None and run_quiet.end_time is not None
    assert run_quiet.start_time <= seen["quiet_ran_at"] <= run_quiet.end_time
    assert dict(run_quiet.attributes or {})["akadze.task"] == "report.quiet"


class CurrentSpanReader(SpanProcessor):
    """A span processor that reads the current span as a span starts (as context-enriching
    processors do)."""

    def __init__(self) -> None:
        self.seen: list[trace.SpanContext] = []

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        self.seen.append(trace.get_current_span().get_span_context())


@pytest.mark.timeout(60)
async def test_a_span_processor_reading_the_current_span_as_the_run_span_is_made(
    app: Akadze, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """The run's SDK span is made inside the run (the task asks for it) while the run's span is
    current: the processor's on_start must not wait for that span (it gets the invalid one)."""
    reader = CurrentSpanReader()
    provider.add_span_processor(reader)

    @app.task("report.tag")
    async def tag() -> None:
        trace.get_current_span().set_attribute("report.tagged", True)

    await tag.enqueue()
    await drain(app)
    await flushed(app)
    (run,) = by_name(exporter.get_finished_spans(), "process report.tag")
    assert dict(run.attributes or {})["report.tagged"] is True
    assert trace.INVALID_SPAN_CONTEXT in reader.seen


async def test_each_attempt_is_a_span_and_a_failure_is_an_error(
    app: Akadze, exporter: InMemorySpanExporter
) -> None:
    @app.task("flaky", max_attempts=2)
    async def flaky() -> None:
        raise ValueError("down")

    job = await flaky.enqueue()
    await drain(app)
    async with app.engine.begin() as conn:
        await conn.execute(text("UPDATE akadze_jobs SET run_at = now() WHERE state = 'queued'"))
    await drain(app)
    await flushed(app)
    runs = sorted(by_name(exporter.get_finished_spans(), "process flaky"), key=lambda s: s.start_time or 0)
    assert [dict(s.attributes or {})["akadze.outcome"] for s in runs] == ["retried", "failed"]
    assert [dict(s.attributes or {})["akadze.attempt"] for s in runs] == [1, 2]
    assert all(s.status.status_code is StatusCode.ERROR for s in runs)
    assert all(dict(s.attributes or {})["error.type"] == "ValueError" for s in runs)
    (send,) = by_name(exporter.get_finished_spans(), "send flaky")
    assert all(s.parent is not None and s.parent.span_id == send.context.span_id for s in runs)
    assert job.trace_context is not None


class Args(TypedDict):
    order_id: int


async def test_a_generated_client_records_a_producer_span_and_stores_its_context(
    app: Akadze, exporter: InMemorySpanExporter
) -> None:
    @app.task("order.ship", queue="shipping")
    async def ship(order_id: int) -> None:
        return None

    client: RemoteTask[Args] = RemoteTask(
        "order.ship", queue="shipping", priority=0, max_attempts=3, args_fp=ship.args_fp, args_type=Args
    )
    async with app.engine.begin() as conn:
        (job,) = await client.using(session=conn).enqueue_many([{"order_id": 1}])
    await drain(app)
    await flushed(app)
    spans = exporter.get_finished_spans()
    (send,) = by_name(spans, "send order.ship")
    (run,) = by_name(spans, "process order.ship")
    assert send.kind is SpanKind.PRODUCER
    assert run.parent is not None and run.parent.span_id == send.context.span_id
    stored = await app.get_job(job.id)
    assert stored is not None and stored.trace_context == job.trace_context is not None


async def test_tracing_off_stores_no_context(app: Akadze) -> None:
    @app.task("t")
    async def t() -> None:
        return None

    tracing.disable()
    job = await t.enqueue()
    assert job.trace_context is None
    stored = await app.get_job(job.id)
    assert stored is not None and stored.trace_context is None


async def test_a_traceparent_is_stored_as_its_25_bytes_and_read_back_as_json(
    app: Akadze, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    """A traceparent alone goes into trace_parent (migration 0010); a context with a tracestate,
    and a row written before the migration (JSON in trace_context), read back the same."""

    @app.task("t")
    async def t() -> None:
        return None

    one = await t.enqueue()
    many = await t.enqueue_many([{}, {}])
    assert one.trace_context is not None
    async with app.engine.connect() as conn:
        rows = (
            await conn.execute(
                text("SELECT id, trace_context, trace_parent FROM akadze_jobs ORDER BY id"),
            )
        ).all()
    for row in rows:
        assert row.trace_context is None and row.trace_parent is not None and len(row.trace_parent) == 25
    traceparent = json.loads(one.trace_context)["traceparent"]
    assert bytes(rows[0].trace_parent).hex() == traceparent[3:35] + traceparent[36:52] + traceparent[53:55]
    for job in (one, *many):
        stored = await app.get_job(job.id)
        assert stored is not None and stored.trace_context == job.trace_context

    # a tracestate keeps the JSON text; so does a row of before the migration
    with_state = '{"traceparent":"' + traceparent + '","tracestate":"vendor=1"}'
    async with app.engine.begin() as conn:
        await conn.execute(
            text("UPDATE akadze_jobs SET trace_context = :c, trace_parent = NULL WHERE id = :id"),
            [{"c": with_state, "id": many[0].id}, {"c": one.trace_context, "id": many[1].id}],
        )
    assert (await app.get_job(many[0].id)).trace_context == with_state  # type: ignore[union-attr]
    assert (await app.get_job(many[1].id)).trace_context == one.trace_context  # type: ignore[union-attr]
    # and each run continues its trace from whichever column it was read
    assert await drain(app) == 3
    await flushed(app)
    runs = [span for span in exporter.get_finished_spans() if span.kind is SpanKind.CONSUMER]
    assert len(runs) == 3
    for run in runs:
        assert run.parent is not None and f"{run.parent.span_id:016x}" == traceparent[36:52]


def test_a_tracer_provider_set_turns_tracing_on_without_enable(database_url: str) -> None:
    """DESIGN §5: with a tracer provider set, enqueue records a producer span (a fresh process:
    the global provider can be set once)."""
    imports = "from opentelemetry import trace\nfrom opentelemetry.sdk.trace import TracerProvider"
    body = """
        before = await t.enqueue()
        trace.set_tracer_provider(TracerProvider())
        after = await t.enqueue()
        print(before.trace_context is None, after.trace_context is not None)
    """
    assert words_with_app(database_url, body, imports) == ["True", "True"]


async def test_a_run_of_a_trace_not_sampled_records_nothing_and_passes_the_trace_on(
    app: Akadze, exporter: InMemorySpanExporter
) -> None:
    seen: list[trace.SpanContext] = []

    @app.task("order.ship")
    async def ship() -> None:
        return None

    @app.task("order.pay")
    async def pay() -> None:
        seen.append(trace.get_current_span().get_span_context())
        await ship.enqueue()

    # the request's trace was not sampled at its root: neither is anything under it
    unsampled = trace.SpanContext(0xABC, 0xDEF, is_remote=True, trace_flags=trace.TraceFlags(0))
    token = context.attach(trace.set_span_in_context(trace.NonRecordingSpan(unsampled)))
    try:
        job = await pay.enqueue()
    finally:
        context.detach(token)
    assert job.trace_context is not None and json.loads(job.trace_context)["traceparent"].endswith("-00")
    assert await drain(app) == 2
    await flushed(app)
    assert exporter.get_finished_spans() == ()
    (current_then,) = seen  # the stored context was current in the run: its trace goes on
    assert (current_then.trace_id, current_then.span_id, current_then.trace_flags.sampled) == (
        0xABC,
        int(json.loads(job.trace_context)["traceparent"].split("-")[2], 16),
        False,
    )
    follow_up = await app.get_job(job.id + 1)
    assert follow_up is not None and follow_up.task == "order.ship"
    assert f"-{0xABC:032x}-" in (follow_up.trace_context or "")
    assert tracing._state.open == {}


def test_joined_gives_back_the_json_that_split_kept_as_bytes() -> None:
    from akadze.events import trace_context

    stored = '{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}'
    kept, raw = trace_context.split(stored)
    assert kept is None and raw is not None and len(raw) == 25
    assert trace_context.joined(raw) == stored
    # nothing akadze wrote: no parent rather than a malformed one
    assert trace_context.joined(raw[:24]) is None
    assert trace_context.joined(None) is None
