-- 0003_queue_pauses: paused queues (a row per paused queue; every claim skips them), and the
-- indexes of the dashboard's job listing and overview.

CREATE TABLE akadze_queue_pauses (
    queue text PRIMARY KEY,
    paused_at timestamptz NOT NULL DEFAULT now()
);

-- The jobs listing filters by state, task or queue, newest first, a page at a time after the
-- last id seen (keyset): each filter walks one of these in id order and stops after a page,
-- however many finished rows there are. Combined filters use one of them (or a bitmap AND).
CREATE INDEX akadze_jobs_state_id_idx
    ON akadze_jobs (state, id);

CREATE INDEX akadze_jobs_task_id_idx
    ON akadze_jobs (task, id);

CREATE INDEX akadze_jobs_queue_id_idx
    ON akadze_jobs (queue, id);

-- Failures of the last hour per queue (the overview): failed rows only, so it stays small.
CREATE INDEX akadze_jobs_failed_idx
    ON akadze_jobs (finished_at)
    WHERE state = 'failed';
