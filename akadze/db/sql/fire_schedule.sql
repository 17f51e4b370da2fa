-- fire_schedule: claims the fire time :fire_at of :schedule for this transaction, which then
-- enqueues its job. Nothing is claimed when the fire time is not due by the database's clock
-- (in the future, or more than :grace_s seconds late) or when a run of it exists. Relies on the
-- primary key (schedule, fire_at): a concurrent claim of the same fire time waits for the first
-- transaction, then does nothing if it committed (ON CONFLICT: an expected conflict, not an
-- error) and claims if it rolled back. Returns a row only when this transaction claimed.
INSERT INTO akadze_schedule_runs (schedule, fire_at)
SELECT
    :schedule,
    CAST(:fire_at AS timestamptz)
WHERE CAST(:fire_at AS timestamptz) <= now()
    AND CAST(:fire_at AS timestamptz) > now() - make_interval(secs => CAST(:grace_s AS double precision))
ON CONFLICT DO NOTHING
RETURNING fire_at
