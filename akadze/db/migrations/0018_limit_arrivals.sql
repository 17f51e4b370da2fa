-- 0018_limit_arrivals: jobs of a limited task can be parked by the enqueue that writes them, so
-- that a backlog enqueued at once never enters the claim index (docs/flow-control.md, "Parked at
-- enqueue"). A producer that knows the task's Limit inserts a job that is due now as parked
-- (parked = 'limit', its group in limit_grp) and, in the same statement, one row here per group
-- it parked jobs of. A limited claim looks for these rows (per queue and task, one probe per
-- group), looks at those groups' parked jobs as it looks at a due group's, and deletes the rows
-- it read. The row commits with its jobs, so a claim that sees the row sees them: a job parked
-- at enqueue is never left parked with no claim to look for it. Producers only insert here and
-- never write a group's row, so they never wait for a claim, nor a claim for them.
--
-- No primary key: nothing reads one row by itself, and an enqueue pays for one index only. The
-- index serves the claims' walk of the distinct groups of a (queue, task), and their delete.
CREATE TABLE akadze_limit_arrivals (
    queue text NOT NULL,
    task text NOT NULL,
    grp text NOT NULL
);
CREATE INDEX akadze_limit_arrivals_idx ON akadze_limit_arrivals (queue, task, grp);
