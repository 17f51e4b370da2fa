-- register_worker: records this worker incarnation, or refreshes it after it was declared lost.
INSERT INTO akadze_workers (id, name, host, pid, queues, slots, lost_after_s)
VALUES (CAST(:id AS uuid), :name, :host, :pid, CAST(:queues AS text[]), :slots, :lost_after_s)
ON CONFLICT (id) DO UPDATE
SET heartbeat_at = now()
