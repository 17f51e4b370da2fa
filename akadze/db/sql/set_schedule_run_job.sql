-- set_schedule_run_job: records which job a claimed fire time enqueued, in the transaction
-- that claimed it (the row is already locked by that insert). Primary key lookup.
UPDATE akadze_schedule_runs
SET job_id = :job_id
WHERE schedule = :schedule
    AND fire_at = CAST(:fire_at AS timestamptz)
