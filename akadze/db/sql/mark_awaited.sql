-- mark_awaited: a waiter says it waits for this job, so that the statement finishing it sends a
-- notification (complete_batch, request_cancel). Only an unfinished job not yet marked is
-- written; the row lock orders this against a completion: either the completion sees the mark
-- and notifies, or it committed first and the waiter's next read finds the job finished.
UPDATE akadze_jobs
SET awaited = true
WHERE id = :id
    AND state IN ('queued', 'running')
    AND NOT awaited
