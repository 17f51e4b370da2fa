-- 0015_limit_parking: jobs held back by a Limit leave the claim index (docs/flow-control.md).
-- A limited claim that finds a job's group full parks the job (parked = 'limit', with its group
-- in limit_grp), so no later claim reads it again; a claim that finds room in a group takes the
-- group's parked jobs straight from the index below, in claim order. However many jobs are
-- held, the claim index holds none of them.

-- A group's parked jobs in claim order, with their queue: a claim walks a group's first entries
-- from the index alone (an index-only scan), then locks those rows. Only parked jobs are in it:
-- a job writes an entry when a claim parks it, and leaves it when a claim takes it (or it is
-- cancelled).
CREATE INDEX akadze_jobs_limit_parked_idx
    ON akadze_jobs (limit_grp, priority DESC, run_at, id)
    INCLUDE (queue)
    WHERE state = 'queued' AND parked = 'limit';

-- When a claim should next look at the group's parked jobs: NULL while the group has none;
-- now() while it has room; the next time a place may be free while it is full (a recheck, or
-- when its rate window's oldest start leaves it). Claims write it under the group row's lock.
-- A constant default (NULL): no table rewrite.
ALTER TABLE akadze_limit_groups ADD COLUMN due_at timestamptz;
CREATE INDEX akadze_limit_groups_due_idx
    ON akadze_limit_groups (due_at)
    WHERE due_at IS NOT NULL;
