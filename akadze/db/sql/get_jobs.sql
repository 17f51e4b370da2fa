-- get_jobs: whole rows of the given jobs, in id order (for on_transition hooks after a write,
-- and get_job's one).
-- {job_row} (db/sql.py) reads the JSON columns as text, decoded per row: one undecodable row
-- must not fail a rescue or a completion batch.
SELECT
    {job_row}
FROM akadze_jobs
WHERE id = ANY(CAST(:ids AS bigint[]))
ORDER BY id
