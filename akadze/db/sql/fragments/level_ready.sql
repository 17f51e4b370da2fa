-- {level_ready}: queue q.name's ready jobs at priority level.priority ({queue_levels}), in
-- claim order (akadze_jobs_claim_idx); the claims (claim_completing.sql, claim_limited.sql)
-- add how many and lock them FOR UPDATE SKIP LOCKED.
FROM akadze_jobs AS j
WHERE j.state = 'queued'
    AND j.parked IS NULL
    AND j.queue = q.name
    AND j.priority = level.priority
    AND j.run_at <= now()
ORDER BY j.priority DESC, j.run_at, j.id
