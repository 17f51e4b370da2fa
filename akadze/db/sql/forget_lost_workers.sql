-- forget_lost_workers: deletes workers whose heartbeat is older than their own lost_after_s
-- (database clock); their running jobs become orphans for find_orphans.
DELETE FROM akadze_workers
WHERE heartbeat_at + make_interval(secs => lost_after_s) < now()
RETURNING id
