"""What observability costs per job, piece by piece, on the interpreter alone (no database):
``python -m bench.obs_costs``. Each figure is the best of five timeit rounds.

The pieces are what a worker does per run with metrics and tracing on (docs/performance.md,
"Observability"): the events a claim and an outcome publish, the metrics' tally of them, an
unsampled run's trace context made current and left, and a sampled run's consumer span from
start to end with the SDK (TracerProvider, ParentBased(TraceIdRatioBased), a
BatchSpanProcessor and an exporter that drops the spans, as the bench's akadze_obs peer).
"""

from __future__ import annotations

import itertools
import timeit
from datetime import UTC, datetime
from typing import Any

import msgspec

ROUNDS = 2_000


def main() -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

    from akadze import Akadze
    from akadze.events import Kind, event_of, trace_context, tracing
    from akadze.events.metrics import RunMetrics
    from akadze.job import Job, JobState
    from akadze.outcomes import Verdict

    class Discard(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(0.1)))
    provider.add_span_processor(BatchSpanProcessor(Discard()))
    tracing.enable(provider)
    app = Akadze(database_url="postgresql://unused@127.0.0.1/unused")
    now = datetime.now(UTC)
    rest = [None] * (len(Job.__struct_fields__) - 14)
    job = Job(
        1, "bench.noop", "default", JobState.RUNNING, 0, {"i": 1}, 1, 25, 1, now, None, False, (), None, *rest
    )
    tracer = trace.get_tracer("bench", tracer_provider=provider)

    def stored(sampled: bool) -> str:
        while True:  # a producer span of the wanted kind, drawn by the sampler
            with tracer.start_as_current_span("send") as span:
                context = span.get_span_context()
                if context.trace_flags.sampled == sampled:
                    carried = trace_context.carrier(trace, tracing._state.propagator, context)
                    assert carried is not None
                    return carried

    unsampled_job = msgspec.structs.replace(job, trace_context=stored(False))
    sampled_job = msgspec.structs.replace(job, trace_context=stored(True))

    def claimed() -> Any:
        return event_of(Kind.CLAIMED, job, JobState.QUEUED, worker_id="w", wait_s=(now - now).total_seconds())

    def ended() -> Any:
        return event_of(
            Kind.ENDED,
            job,
            JobState.RUNNING,
            worker_id="w",
            outcome=Verdict.SUCCEEDED,
            duration_s=0.001,
            wait_s=0.01,
        )

    tally = RunMetrics()
    claims, ends = [claimed() for _ in range(50)], [ended() for _ in range(50)]
    ids = itertools.count(2)
    end = ended()

    def unsampled() -> None:
        tracing.leave_run(tracing.start_run(app, unsampled_job))

    def sampled() -> None:
        job_id = next(ids)
        tracing.leave_run(tracing.start_run(app, msgspec.structs.replace(sampled_job, id=job_id)))
        tracing._end_runs(msgspec.structs.replace(end, job_id=job_id))

    pieces: list[tuple[str, Any, int]] = [
        ("CLAIMED event", claimed, 1),
        ("ENDED event", ended, 1),
        ("metrics tally of both (per job, in claims of 50)", lambda: (tally(claims), tally(ends)), 50),
        ("tracing, unsampled run: context made current, left", unsampled, 1),
        ("tracing, events filter (is the run's span open?)", lambda: tracing._is_open(end), 1),
        ("tracing, sampled run: consumer span, SDK", sampled, 1),
    ]
    print("| piece | µs |\n|---|---|")
    for name, piece, per in pieces:
        best = min(timeit.repeat(piece, number=ROUNDS, repeat=5)) / ROUNDS / per
        print(f"| {name} | {best * 1e6:.2f} |")
    provider.shutdown()


if __name__ == "__main__":
    main()
