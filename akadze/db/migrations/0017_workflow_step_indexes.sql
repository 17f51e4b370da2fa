-- 0017_workflow_step_indexes: a workflow step's ends write fewer index entries, and the edges
-- are read by index probes whatever their statistics (docs/performance.md, "Workflows").
--
-- akadze_jobs_workflow_idx (workflow_id, step), unique, took a new entry at every state change
-- of a step (a change of state is not a HOT update: the state is in index predicates) and
-- checked it for uniqueness with a heap visit to the row's older version: three times per run
-- of a step. A step's name is unique in its workflow without it: the one statement that writes
-- steps (enqueue_workflow.sql) inserts them with the workflow it creates, and its one caller
-- (WorkflowQueries.enqueue_workflow) refuses a name given twice; nothing changes a step's
-- name or workflow afterwards. A workflow's steps are found by workflow_id through two partial
-- indexes: its unfinished ones (akadze_jobs_workflow_open_idx, 0016) and its finished ones,
-- below, whose entry a step writes once, when it finishes (a read of every step states both
-- halves: state IN ('queued', 'running') OR state IN ('succeeded', 'failed', 'cancelled')).
DROP INDEX akadze_jobs_workflow_idx;
CREATE INDEX akadze_jobs_workflow_done_idx
    ON akadze_jobs (workflow_id)
    WHERE workflow_id IS NOT NULL AND state IN ('succeeded', 'failed', 'cancelled');
-- The statements that end steps read each ended step's edges by parent_id, under a generic
-- plan: the planner takes the edges per parent on average, from ANALYZE's count of distinct
-- parents, and one fan-out of 100,000 steps makes that 100,000, enough to read the whole table
-- instead of probing the index. Most parents have one or two children: state that, whatever
-- ANALYZE finds (it is an estimate only; taken at the next ANALYZE).
ALTER TABLE akadze_job_deps ALTER COLUMN parent_id SET (n_distinct = -0.5);
