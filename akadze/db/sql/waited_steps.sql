-- waited_steps: what a step still waits for (`akadze jobs explain`): whether it is parked for
-- its parents (parked 'deps'), how many it counts (deps_left), what their failure does to it
-- (after_failure), and its parents that have not finished (queued or running), the first
-- :limit in id order with their count. Relies on the primary key and
-- akadze_job_deps_child_idx. Reads only, takes no lock. No row: no such job; one row whose
-- parent_id is NULL: no parent left unfinished.
SELECT
    c.workflow_id,
    c.state = 'queued' AND c.parked = 'deps' AS waiting,
    c.deps_left,
    c.after_failure,
    p.id AS parent_id,
    p.step,
    p.state,
    p.unfinished
FROM akadze_jobs AS c
LEFT JOIN LATERAL (
    SELECT
        j.id,
        j.step,
        j.state,
        count(*) OVER () AS unfinished
    FROM akadze_job_deps AS d
    JOIN akadze_jobs AS j
        ON j.id = d.parent_id
    WHERE d.child_id = c.id
        AND j.state IN ('queued', 'running')
    ORDER BY j.id
    LIMIT CAST(:limit AS integer)
) AS p
    ON true
WHERE c.id = CAST(:id AS bigint)
ORDER BY p.id
