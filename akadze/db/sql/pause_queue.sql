-- pause_queue: marks a queue paused (every claim skips it from the next one on) and wakes
-- every listening worker; idempotent (changed is false when it was already paused). A queue
-- may be paused before it has any job. Primary key insert: concurrent pauses of one queue
-- make one row.
WITH paused AS (
    INSERT INTO akadze_queue_pauses (queue)
    VALUES (:queue)
    ON CONFLICT (queue) DO NOTHING
    RETURNING queue
)
SELECT
    EXISTS (SELECT 1 FROM paused) AS changed,
    pg_notify('akadze_jobs', CAST(:queue AS text)) IS NULL AS notified
