-- step_parents: the state of the parents :ids of the steps a requeue takes back
-- (akadze/control/steps.py), read by a statement of its own once step_dependents.sql holds
-- those steps' locks, in a READ COMMITTED transaction (steps.py checks): a parent whose end
-- committed while the requeue waited for a lock (its write locks the steps after it too) is
-- read as it ended. In the same statement, with that statement's snapshot, it read as still
-- running, and the step after it waited for it for ever. No lock: a parent's write in progress
-- meets the locks held here on the steps after it, and counts itself once they are released.
SELECT j.id, j.state
FROM akadze_jobs AS j
WHERE j.id = ANY (CAST(:ids AS bigint[]))
