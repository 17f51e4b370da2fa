-- explain_context: what `akadze jobs explain` needs besides job :id's row: the database's clock,
-- when its queue :queue was paused (NULL when it is not) and whether a claim parked the job
-- ('limit': its Limit's group was full; NULL otherwise). Primary-key lookups; reads only.
SELECT
    now() AS now,
    (SELECT p.paused_at FROM akadze_queue_pauses AS p WHERE p.queue = :queue) AS paused_at,
    (SELECT j.parked FROM akadze_jobs AS j WHERE j.id = :id) AS parked
