-- {first_parked}: the id of group g's first parked job (g.grp), in claim order, NULL when it
-- has none: a walk of akadze_jobs_limit_parked_idx that stops at its first entry. A claim
-- clears a group's due_at (claim_limited.sql), and the pruner deletes a group's row
-- (prune_limit_groups.sql), only when it is NULL.
(
    SELECT p.id
    FROM akadze_jobs AS p
    WHERE p.limit_grp = g.grp AND p.state = 'queued' AND p.parked = 'limit'
    ORDER BY p.priority DESC, p.run_at, p.id
    LIMIT 1
)
