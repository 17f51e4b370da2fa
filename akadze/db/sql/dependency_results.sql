-- dependency_results: the steps a workflow step waits for that succeeded, with their results
-- (as text, decoded by the caller); relies on akadze_job_deps_child_idx, then primary key
-- lookups. A plain read: the parents are finished, their results no longer change.
SELECT p.step, CAST(p.result AS text) AS result
FROM akadze_job_deps AS d
JOIN akadze_jobs AS p ON p.id = d.parent_id
WHERE d.child_id = CAST(:id AS bigint)
    AND p.state = 'succeeded'
ORDER BY p.id
