-- set_result: stores the body's return value after complete_tx committed the job;
-- fenced like every write of a run.
UPDATE akadze_jobs
SET result = CAST(:result AS jsonb)
WHERE id = :id
    AND run = :run
    AND state = 'succeeded'
