-- step_dependents: what a requeue of workflow step :id needs to re-park the steps after it
-- (akadze/control/steps.py): its children, and through every child a failure cancelled
-- (DependencyFailed, its last error entry), theirs; each locked in id order (the order every
-- statement that ends steps locks them in), with the id of each of its parents (their states
-- are read after these locks are held: step_parents.sql). Relies on the edges' two indexes and
-- the primary key; the locks hold until the caller's transaction ends.
WITH RECURSIVE down(id) AS (
    SELECT d.child_id
    FROM akadze_job_deps AS d
    WHERE d.parent_id = CAST(:id AS bigint)
    UNION
    SELECT d.child_id
    FROM down
    JOIN akadze_jobs AS c ON c.id = down.id
    JOIN akadze_job_deps AS d ON d.parent_id = down.id
    WHERE c.state = 'cancelled'
        AND c.errors -> -1 ->> 'type' = 'akadze.DependencyFailed'
),
locked AS MATERIALIZED (
    SELECT j.id, j.state, j.parked, j.after_failure, j.errors -> -1 ->> 'type' AS last_error
    FROM akadze_jobs AS j
    WHERE j.id = ANY (ARRAY(SELECT down.id FROM down))
    ORDER BY j.id
    FOR UPDATE
)
SELECT l.id, l.state, l.parked, l.after_failure, l.last_error, d.parent_id
FROM locked AS l
JOIN akadze_job_deps AS d ON d.child_id = l.id
ORDER BY l.id, d.parent_id
