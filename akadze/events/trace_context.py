"""The W3C trace context a job stores (``akadze_jobs.trace_context``): written from the
producer span, read back as the parent of the run's span.

The functions take the ``opentelemetry.trace`` module and the propagator (akadze.events.tracing passes
them once tracing is on): nothing here imports opentelemetry.
"""

from __future__ import annotations

import json
from typing import Any

#: what the producer stores, the common case: a W3C traceparent without tracestate
TRACEPARENT_ONLY = '{"traceparent":"00-%032x-%016x-%02x"}'
_PREFIX = '{"traceparent":"00-'
_LENGTH = len(TRACEPARENT_ONLY % (0, 0, 0))
#: a traceparent as split() stores it: trace id (16 bytes), span id (8) and flags (1)
_STORED_BYTES = 25


def carrier(trace: Any, propagator: Any, span_context: Any) -> str | None:
    """The W3C carrier ({"traceparent", "tracestate"}) of ``span_context`` as JSON text; None
    for an invalid context (a no-op span). Formatted by hand when there is no tracestate: the
    propagator and json cost more than the span on the hot path."""
    if not span_context.is_valid:
        return None
    if not span_context.trace_state:
        return TRACEPARENT_ONLY % (span_context.trace_id, span_context.span_id, span_context.trace_flags)
    found: dict[str, str] = {}
    propagator.inject(found, context=trace.set_span_in_context(trace.NonRecordingSpan(span_context)))
    return json.dumps(found, separators=(",", ":"))


def split(stored: str | None) -> tuple[str | None, bytes | None]:
    """How ``stored`` goes into the row: (akadze_jobs.trace_context, akadze_jobs.trace_parent).

    A traceparent alone, the common case, is kept as its 25 bytes in trace_parent (version 00,
    trace id, span id, flags; migration 0010): a third of the row width the JSON text took,
    in every row version the claim and the outcome write. Anything else stays JSON text in
    trace_context. A job read back has the JSON text either way (:func:`joined`)."""
    if stored is None or len(stored) != _LENGTH or not stored.startswith(_PREFIX):
        return stored, None
    try:
        return None, bytes.fromhex(stored[19:51] + stored[52:68] + stored[69:71])
    except ValueError:
        return stored, None


def joined(stored: bytes | None) -> str | None:
    """The JSON text of a traceparent that :func:`split` kept as its 25 bytes (None for None,
    and for bytes that are not 25: nothing akadze wrote).

    The last one made is kept: the jobs of one ``enqueue_many`` share their producer span, and
    a claim returns them side by side."""
    global _last_joined
    if stored is None or len(stored) != _STORED_BYTES:
        return None
    last = _last_joined
    if last[0] == stored:
        return last[1]
    digits = stored.hex()
    text = f'{_PREFIX}{digits[:32]}-{digits[32:48]}-{digits[48:]}"}}'
    _last_joined = (stored, text)
    return text


#: the last traceparent :func:`joined` made, and its bytes (one tuple, swapped whole)
_last_joined: tuple[bytes, str] = (b"", "")


def parent(trace: Any, propagator: Any, stored: str) -> Any:
    """The Context of the stored carrier's span (remote); None when it cannot be read."""
    if len(stored) == _LENGTH and stored.startswith(_PREFIX):
        try:
            trace_id = int(stored[19:51], 16)
            span_id = int(stored[52:68], 16)
            flags = int(stored[69:71], 16)
        except ValueError:
            return None
        span_context = trace.SpanContext(
            trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(flags)
        )
        if not span_context.is_valid:
            return None
        return trace.set_span_in_context(trace.NonRecordingSpan(span_context))
    try:
        found = json.loads(stored)
    except ValueError:
        return None
    return propagator.extract(found) if isinstance(found, dict) else None


def sampled(trace: Any, context: Any) -> bool:
    """Whether the span of ``context`` (a stored context read back) was sampled."""
    return bool(trace.get_current_span(context).get_span_context().trace_flags.sampled)
