-- 0002_task_schemas: what each registered worker runs, for `akadze codegen verify`: one row per
-- (worker, task) with the task's queue and argument-schema fingerprint. Written when the worker
-- registers (and registers again); the rows go with their worker (ON DELETE CASCADE), so a
-- worker that unregisters or is forgotten as lost takes them along.

CREATE TABLE akadze_task_schemas (
    worker_id uuid NOT NULL REFERENCES akadze_workers (id) ON DELETE CASCADE,
    task text NOT NULL,
    queue text NOT NULL,
    args_fp text NOT NULL,
    PRIMARY KEY (worker_id, task)
);
