-- heartbeat: proves this worker is alive; no row back means it was declared lost.
UPDATE akadze_workers
SET heartbeat_at = now()
WHERE id = CAST(:id AS uuid)
RETURNING id
