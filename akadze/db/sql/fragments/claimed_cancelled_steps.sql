-- {claimed_cancelled_steps}: the workflow steps a claim ended cancelled at once (cancel
-- requested or expired before their run), as the settle step's ended rows (id, step, state):
-- their waiting children are cancelled with them, or released if they run whatever their
-- parents' end ({settle_steps}). Both claims (claim_completing.sql, claim_limited.sql) read
-- them from their CTE named claimed.
SELECT claimed.id, claimed.step, claimed.state
FROM claimed
WHERE claimed.workflow_id IS NOT NULL
    AND claimed.state = 'cancelled'
