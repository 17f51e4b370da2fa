-- discard_plans: a claim connection's cached plans are made again at their next run, with
-- the table as it is now (runs.REPLAN_S says when; generic_plans.sql why they are kept).
-- The statements stay prepared.
DISCARD PLANS
