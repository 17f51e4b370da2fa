-- {claimable_priority}: the priority of a claimable job j, queued and not parked (the
-- predicate of the claim indexes, akadze_jobs_claim_idx and akadze_jobs_claim_many_idx, which a
-- read repeats to walk them). Each step of a walk of the priorities present starts with it, adds
-- its queue condition (and the level to go below) and takes the highest, ORDER BY j.priority
-- DESC LIMIT 1, one index probe: {queue_levels} per queue, claim_completing.sql's many_level
-- over every queue.
SELECT j.priority
FROM akadze_jobs AS j
WHERE j.state = 'queued'
    AND j.parked IS NULL
