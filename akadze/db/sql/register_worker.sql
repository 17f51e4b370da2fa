-- register_worker: records this worker incarnation, or refreshes it after it was declared lost,
-- and publishes the tasks it runs (name, queue, argument fingerprint; three parallel arrays).
WITH worker AS (
    INSERT INTO akadze_workers (id, name, host, pid, queues, slots, lost_after_s)
    VALUES (CAST(:id AS uuid), :name, :host, :pid, CAST(:queues AS text[]), :slots, :lost_after_s)
    ON CONFLICT (id) DO UPDATE
    SET heartbeat_at = now()
    RETURNING id
)
INSERT INTO akadze_task_schemas (worker_id, task, queue, args_fp)
SELECT worker.id, t.task, t.queue, t.args_fp
FROM worker
CROSS JOIN unnest(
    CAST(:task_names AS text[]), CAST(:task_queues AS text[]), CAST(:task_fps AS text[])
) AS t (task, queue, args_fp)
ON CONFLICT (worker_id, task) DO UPDATE
SET queue = EXCLUDED.queue, args_fp = EXCLUDED.args_fp
