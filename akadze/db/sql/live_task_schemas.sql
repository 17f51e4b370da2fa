-- live_task_schemas: every live worker (heartbeat within its own lost_after_s, database clock)
-- with the queues it serves and each task it published; a worker that published none has one
-- row with a NULL task.
SELECT
    w.id AS worker_id,
    w.name,
    w.queues,
    s.task,
    s.queue,
    s.args_fp
FROM akadze_workers AS w
LEFT JOIN akadze_task_schemas AS s ON s.worker_id = w.id
WHERE w.heartbeat_at + make_interval(secs => w.lost_after_s) >= now()
ORDER BY w.name, w.id, s.task
