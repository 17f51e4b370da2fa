-- {first_parked}: the id of group g's first parked job (g.grp), in claim order, NULL when it
-- has none: a walk of akadze_jobs_limit_parked_idx that stops at its first entry. A claim
-- clears a group's due_at (claim_limited.sql), and the pruner deletes a group's row
-- (prune_limit_groups.sql), only when it is NULL.
(
    SELECT r.id
    FROM akadze_jobs AS r
    WHERE r.limit_grp = g.grp AND r.state = 'queued' AND r.parked = 'limit'
    ORDER BY r.priority DESC, r.run_at, r.id
    LIMIT 1
)
