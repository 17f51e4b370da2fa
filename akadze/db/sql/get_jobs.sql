-- get_jobs: whole rows of the given jobs, in id order (for on_transition hooks after a write).
SELECT *
FROM akadze_jobs
WHERE id = ANY(CAST(:ids AS bigint[]))
ORDER BY id
