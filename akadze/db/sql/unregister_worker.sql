-- unregister_worker: a worker's graceful exit.
DELETE FROM akadze_workers
WHERE id = CAST(:id AS uuid)
