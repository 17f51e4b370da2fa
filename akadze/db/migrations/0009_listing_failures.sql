-- 0009_listing_failures: the dashboard's listing indexes of 0003 hold failed and cancelled
-- rows only, no longer succeeded ones. Succeeded rows are the bulk of a queue's finished jobs,
-- and every job that succeeded wrote one entry in each of the three when it ended (about 250
-- bytes of WAL per job, 0.86x the burst drain's rate without them: docs/performance.md). A
-- listing of succeeded jobs finds them by walking the primary key newest first, as a listing
-- without a state filter always did: they are most of what it walks past. The failures, which
-- are few and the reason to open the dashboard, keep an index per filter (state, task, queue),
-- so a page of them costs a page however many jobs succeeded (docs/dashboard.md).
-- Each index is dropped and made again with the same name: CREATE INDEX reads the table once
-- (3 s each with a million rows on the loaded 2-core development machine) and holds off writes
-- to the table meanwhile.
DROP INDEX akadze_jobs_state_id_idx;
DROP INDEX akadze_jobs_task_id_idx;
DROP INDEX akadze_jobs_queue_id_idx;

CREATE INDEX akadze_jobs_state_id_idx
    ON akadze_jobs (state, id)
    WHERE state IN ('failed', 'cancelled');

CREATE INDEX akadze_jobs_task_id_idx
    ON akadze_jobs (task, id)
    WHERE state IN ('failed', 'cancelled');

CREATE INDEX akadze_jobs_queue_id_idx
    ON akadze_jobs (queue, id)
    WHERE state IN ('failed', 'cancelled');
