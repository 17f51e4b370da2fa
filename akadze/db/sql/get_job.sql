-- get_job: one job by id.
SELECT *
FROM akadze_jobs
WHERE id = :id
