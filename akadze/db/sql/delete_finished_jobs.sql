-- delete_finished_jobs: deletes the jobs of :ids that are finished (succeeded, failed or
-- cancelled), as the pruner would, and returns their ids; queued and running jobs are left
-- alone. The dashboard's delete action (a confirmed, bounded selection). Primary-key lookups;
-- rows another transaction holds are waited for, as any update of a job would.
DELETE FROM akadze_jobs AS j
WHERE j.id = ANY (CAST(:ids AS bigint[]))
    AND j.state IN ('succeeded', 'failed', 'cancelled')
RETURNING j.id
