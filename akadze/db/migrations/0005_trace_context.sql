-- 0005_trace_context: the W3C trace context of the span that enqueued the job (akadze.tracing),
-- so that its runs continue that trace. NULL when tracing is off. Nullable without a default:
-- no table rewrite, it applies at once on a large table.

ALTER TABLE akadze_jobs ADD COLUMN trace_context text;
