-- {claim_reply}: the rows of every form of the worker's claim (claim_completing.sql and its
-- plain forms) for the jobs it claimed (written false) and the outcomes it wrote
-- (written true, the columns a write does not return NULL). A finished job that a waiter marked
-- (mark_awaited) sends its id on akadze_done; jobs nobody waits for send no NOTIFY. The JSON
-- columns come back as text, decoded per job by the worker: a row that cannot be decoded fails
-- alone instead of the whole reply. A claimed job's result is not sent: it has none it needs.
SELECT {claimed_reply}, false AS written, NULL AS notified
FROM claimed
UNION ALL
SELECT
    {written_reply},
    true AS written,
    CASE
        WHEN done.awaited AND done.state IN ('succeeded', 'failed', 'cancelled')
        THEN pg_notify('akadze_done', CAST(done.id AS text)) IS NULL
    END AS notified
FROM done
