-- generic_plans: on a direct connection whose claims run claim_limited (prepared), plan that
-- statement once instead of at every call: planning it costs more than running it (measured:
-- about 1.5 ms against 1-2 ms), and its generic plan is as good (the limits and queues arrive
-- as arrays either way). JIT off: the generic plan's cost estimate, built for any LIMIT, would
-- otherwise cross jit_above_cost and compile for seconds. Session settings of akadze's own claim
-- connection only, never sent through a pooler (prepared.py tells); correctness does not
-- depend on them.
SELECT set_config('plan_cache_mode', 'force_generic_plan', false), set_config('jit', 'off', false)
