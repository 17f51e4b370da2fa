-- {level_ready}: queue q.name's ready jobs at priority level.priority ({queue_levels}), in
-- claim order (akadze_jobs_claim_idx), locked as they are read, skipping those another
-- transaction holds; the claims (claim_completing.sql's {ready_jobs}, claim_limited.sql) add
-- how many (a LIMIT after FOR UPDATE bounds the rows locked, as one before it would).
FROM akadze_jobs AS j
WHERE j.state = 'queued'
    AND j.parked IS NULL
    AND j.queue = q.name
    AND j.priority = level.priority
    AND j.run_at <= now()
ORDER BY j.priority DESC, j.run_at, j.id
FOR UPDATE SKIP LOCKED
