-- queue_pause: the database's clock and when queue :queue was paused (NULL when it is not):
-- what `akadze jobs explain` needs besides the job's row. Primary-key lookup; reads only.
SELECT
    now() AS now,
    (SELECT p.paused_at FROM akadze_queue_pauses AS p WHERE p.queue = :queue) AS paused_at
