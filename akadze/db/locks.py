"""The advisory lock keys akadze takes, in one place so that no two collide and an operator who
sees one in pg_locks can tell whose it is: each is "akadze" and a letter, as an integer.

All are transaction-scoped (``pg_advisory_xact_lock`` or ``pg_try_advisory_xact_lock``): no
session state, so they hold through PgBouncer in transaction mode.
"""

#: ``akadze db migrate`` and the alembic bridge (db/migrate.py, alembic.py): one migrator at a
#: time, waited for; "akadze"
MIGRATE = 0x616B61647A65
#: the pruner's batches (worker/pruner.py): a worker that does not get it leaves the pass to the
#: holder; "akadzep"
PRUNE = 0x616B61647A6570
#: the trends' rollup (worker/trends.py), tried like the pruner's; "akadzet"
ROLLUP = 0x616B61647A6574
