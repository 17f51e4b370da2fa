"""The SQL of ``python -m bench.soak`` (bench/soak.py), run by the harness on the soak's database:
the trigger that counts pruned rows, the per-minute samples and the end's accounting."""

FINISHED = "('succeeded', 'failed', 'cancelled')"

#: counts what the pruner deletes (by state, and whether the job was claimed more than once)
TRIGGER_SQL = """
CREATE TABLE soak_pruned (state text, again boolean, n bigint);
CREATE FUNCTION soak_count_pruned() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO soak_pruned SELECT state, run > 1, count(*) FROM gone GROUP BY 1, 2;
    RETURN NULL;
END $$;
CREATE TRIGGER soak_pruned AFTER DELETE ON akadze_jobs REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION soak_count_pruned();
"""
#: the jobs started in [$1, $2): finished ones through akadze_jobs_prune_idx, plus the running
LATENCY_SQL = f"""
WITH s AS (
    SELECT started_at - created_at AS wait FROM akadze_jobs
    WHERE state IN {FINISHED} AND finished_at >= $1 AND started_at >= $1 AND started_at < $2
    UNION ALL
    SELECT started_at - created_at FROM akadze_jobs
    WHERE state = 'running' AND started_at >= $1 AND started_at < $2
)
SELECT count(*) AS started,
       1000 * extract(epoch FROM percentile_disc(0.5) WITHIN GROUP (ORDER BY wait)) AS p50_ms,
       1000 * extract(epoch FROM percentile_disc(0.99) WITHIN GROUP (ORDER BY wait)) AS p99_ms,
       1000 * extract(epoch FROM max(wait)) AS max_ms
FROM s
"""
DONE_SQL = (
    f"SELECT count(*) FROM akadze_jobs WHERE state IN {FINISHED} AND finished_at >= $1 AND finished_at < $2"
)
TABLE_SQL = f"""
SELECT (SELECT count(*) FROM akadze_jobs WHERE state = 'queued') AS queued,
       (SELECT count(*) FROM akadze_jobs WHERE state = 'running') AS running,
       (SELECT count(*) FROM akadze_jobs WHERE state IN {FINISHED}) AS finished_rows,
       n_live_tup AS live, n_dead_tup AS dead,
       pg_relation_size('akadze_jobs') AS table_bytes, pg_indexes_size('akadze_jobs') AS index_bytes,
       (SELECT max(age(backend_xmin)) FROM pg_stat_activity WHERE datname = current_database()) AS xmin_age
FROM pg_stat_user_tables WHERE relname = 'akadze_jobs'
"""
#: the jobs a killed worker (by its process id) left in state running
IN_FLIGHT_SQL = """
SELECT count(*) FROM akadze_jobs AS j JOIN akadze_workers AS w ON w.id = j.worker_id
WHERE j.state = 'running' AND w.pid = $1
"""
ACCOUNT_SQL = """
SELECT state, again, sum(n)::bigint AS n FROM (
    SELECT state, run > 1 AS again, count(*) AS n FROM akadze_jobs GROUP BY 1, 2
    UNION ALL SELECT state, again, n FROM soak_pruned
) AS t GROUP BY 1, 2 ORDER BY 1, 2
"""
