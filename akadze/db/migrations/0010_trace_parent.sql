-- 0010_trace_parent: a job's trace context in 25 bytes when it is a traceparent alone (version
-- 00, trace id, span id, flags: akadze.trace_context.split), instead of its 73 characters of
-- JSON in trace_context, which now holds only a context with a tracestate (and the rows
-- written before this migration). Every row version of a job carries it (the insert, the
-- claim, the outcome): the JSON made a drained job's rows half as wide again. Statements read
-- the JSON text back from either column (akadze.db.sql.trace_context_of).
-- Nullable without a default: no table rewrite, it applies at once on a large table.

ALTER TABLE akadze_jobs ADD COLUMN trace_parent bytea;
