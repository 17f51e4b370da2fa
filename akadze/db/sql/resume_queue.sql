-- resume_queue: removes a queue's pause and wakes every listening worker, so those serving
-- the queue claim at once; idempotent (changed is false when it was not paused).
WITH resumed AS (
    DELETE FROM akadze_queue_pauses
    WHERE queue = :queue
    RETURNING queue
)
SELECT
    EXISTS (SELECT 1 FROM resumed) AS changed,
    pg_notify('akadze_jobs', CAST(:queue AS text)) IS NULL AS notified
