-- 0004_awaited_jobs: a job someone waits for (wait_for) says so, and the statements that finish
-- it send its id on the akadze_done channel; jobs nobody waits for cost no notification.
-- A constant default: no table rewrite (PostgreSQL 11+), so it applies at once on a large table.

ALTER TABLE akadze_jobs ADD COLUMN awaited boolean NOT NULL DEFAULT false;
