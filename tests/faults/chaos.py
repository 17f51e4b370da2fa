"""The long fault runs: ``python -m tests.faults.chaos [--scenario NAME ...] [--duration S]``.

Starts its own PostgreSQL for the run (akadze's embedded launcher, loopback port; a durable
one for the restart scenario; a primary and a standby, or pg_auto_failover's formation, for
the failover scenarios), runs each scenario at its long size one after the other, and
prints one Markdown table of figures (docs/reliability.md shows the last one). Logs, the
figures as JSON and the pgbouncer files stay in ``--out``. Exit status 1 if any scenario
fails its criteria.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from . import (
    autofailover,
    flow_chaos,
    gil,
    herd,
    hostile_rows,
    pgbouncer,
    replication,
    scenarios,
    workflow_chaos,
)
from .autofailover import Formation
from .checker import Figures, markdown_table
from .failover import failover_under_load
from .pgserver import OwnServer

Run = Callable[[scenarios.Env, float, "int | None"], Awaitable[Figures]]


async def _fencing(env: scenarios.Env, duration: float, seed: int | None) -> Figures:
    return await scenarios.sigstop_fencing(env)


async def _race(env: scenarios.Env, duration: float, seed: int | None) -> Figures:
    return await scenarios.completion_race(env.url, env.dsn, iterations=5000, seed=seed)


#: name -> (what it runs, needs a durable server of its own)
SCENARIOS: dict[str, tuple[Run, bool]] = {
    "kill": (
        lambda env, d, seed: scenarios.kill_chaos(
            env, jobs=5000, seconds=d, workers=4, kill_every=(2.0, 5.0), seed=seed, drain_timeout=300
        ),
        False,
    ),
    "fencing": (_fencing, False),
    "race": (_race, False),
    "restart": (
        lambda env, d, seed: scenarios.db_restart(
            env,
            jobs=int(40 * d),
            seconds=d,
            restarts=("fast", "immediate", "fast", "immediate"),
            seed=seed,
        ),
        True,
    ),
    "proxy": (
        lambda env, d, seed: scenarios.connection_faults(
            env, jobs=int(20 * d), seconds=d, cycles=max(1, int(d // 20)), seed=seed
        ),
        False,
    ),
    "pgbouncer": (lambda env, d, seed: scenarios.through_pgbouncer(env, jobs=2000, seconds=d / 2), False),
    "schedule": (lambda env, d, seed: scenarios.schedule_chaos(env, workers=10, seconds=d, seed=seed), False),
    "poison": (lambda env, d, seed: scenarios.poison(env, normal=1000), False),
    "hostile": (lambda env, d, seed: scenarios.hostile_input(env), False),
    "hostile-rows": (lambda env, d, seed: hostile_rows.hostile_rows(env, normal=1000), False),
    "herd": (lambda env, d, seed: herd.retry_herd(env, task="fault.flaky", jobs=2000), False),
    "herd-yielding": (
        lambda env, d, seed: herd.retry_herd(env, task="fault.flaky.yielding", jobs=2000),
        False,
    ),
    "gil": (lambda env, d, seed: gil.gil_holders(env, holders=4, normal=1000), False),
    "pool": (lambda env, d, seed: scenarios.small_pool(env, jobs=2000, slots=64, pool_size=1), False),
    "canary": (lambda env, d, seed: scenarios.canary_logs(env), False),
    "flow-keyed": (
        lambda env, d, seed: flow_chaos.keyed_limit_chaos(
            env, seconds=d, accounts=8, per_account=60, seed=seed
        ),
        False,
    ),
    "flow-rate": (
        lambda env, d, seed: flow_chaos.rate_limit_chaos(env, jobs=int(5 * d), kills=4, seed=seed),
        False,
    ),
    "flow-unique": (
        lambda env, d, seed: flow_chaos.unique_chaos(env, seconds=d, producers=16, keys=10, seed=seed),
        False,
    ),
    "flow-pause": (lambda env, d, seed: flow_chaos.pause_chaos(env, jobs=2000, paused_s=10.0), False),
    "workflows": (
        lambda env, d, seed: workflow_chaos.workflow_chaos(
            env, fan_ins=(1000, 1000, 1000), diamonds=int(4 * d), seconds=d, seed=seed, drain_timeout=600
        ),
        False,
    ),
}


#: failovers on servers of their own (replication.Pair, or pg_auto_failover's formation): name ->
#: (synchronous replication, or None for pg_auto_failover, whose monitor promotes; seconds the
#: standby is held behind before each kill)
FAILOVERS: dict[str, tuple[bool | None, float]] = {
    "failover-sync": (True, 0.0),
    "failover-sync-lag": (True, 0.3),
    "failover-async": (False, 0.0),
    "failover-async-lag": (False, 0.3),
    "failover-auto": (None, 0.0),
}


async def _failover(
    name: str, duration: float, seed: int | None, folder: Path, records: OwnServer
) -> Figures:
    """A failover about every 12 s of ``duration`` (5 s of load before, 6 s after, the dead
    server rebuilt as the standby), the standby held behind as FAILOVERS says;
    pg_auto_failover's formation fails over once."""
    synchronous, lag_s = FAILOVERS[name]
    if synchronous is None:
        # a folder of its own, which pg_autoctl's user is given
        formation = Formation(Path(tempfile.mkdtemp(prefix="akadze-autofailover-")))
        try:
            await formation.start()
            return await failover_under_load(formation, folder, records, lost_after=15.0, seed=seed)
        finally:
            formation.stop()
            shutil.rmtree(formation.folder, ignore_errors=True)
    async with replication.running_pair(synchronous=synchronous) as pair:
        failovers = max(1, int(duration // 12))
        return await failover_under_load(pair, folder, records, failovers=failovers, lag_s=lag_s, seed=seed)


async def run(names: list[str], duration: float, seed: int | None, out: Path) -> list[Figures]:
    results: list[Figures] = []
    shared = OwnServer(out / "server", durable=False)
    shared.start()
    try:
        for index, name in enumerate(names):
            missing = _missing(name)
            if missing is not None:
                print(f"chaos: {missing}; skipping {name}", file=sys.stderr)
                continue
            folder = out / name
            folder.mkdir(parents=True, exist_ok=True)
            print(f"chaos: {name} ...", file=sys.stderr, flush=True)
            began = time.monotonic()
            if name in FAILOVERS:
                fig = await _failover(name, duration, seed, folder, shared)
            else:
                fn, durable = SCENARIOS[name]
                own = OwnServer(out / f"server-{name}", durable=True) if durable else None
                if own is not None:
                    own.start()
                try:
                    env = await scenarios.own_env(own or shared, f"chaos_{index}_{name}", folder)
                    fig = await fn(env, duration, seed)
                finally:
                    if own is not None:
                        own.stop()
            results.append(fig)
            (folder / "figures.json").write_text(
                json.dumps(fig.summary() | {"unmet": fig.unmet}, default=str)
            )
            verdict = "PASS" if not fig.violations() else f"FAIL {fig.violations()} {fig.unmet}"
            print(
                f"chaos: {name}: {verdict} in {time.monotonic() - began:.0f} s", file=sys.stderr, flush=True
            )
    finally:
        shared.stop()
    return results


def _missing(name: str) -> str | None:
    """What a scenario needs and this machine lacks, or None."""
    if name == "pgbouncer" and not pgbouncer.available():
        return "pgbouncer is not installed"
    if name in FAILOVERS:
        return replication.missing() or (autofailover.missing() if FAILOVERS[name][0] is None else None)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.faults.chaos", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scenario",
        action="append",
        choices=sorted([*SCENARIOS, *FAILOVERS]),
        help="run only this scenario (repeatable); all of them by default",
    )
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of faults per scenario")
    parser.add_argument("--seed", type=int, default=None, help="seed of the fault schedule")
    parser.add_argument("--out", type=Path, default=None, help="folder for logs and figures (kept)")
    args = parser.parse_args(argv)
    names = args.scenario or [*SCENARIOS, *FAILOVERS]
    out = args.out or Path(tempfile.mkdtemp(prefix="akadze-chaos-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"chaos: logs and figures in {out}", file=sys.stderr)
    # the in-process parts (producers, the race's rescues) log to a file, not the terminal
    logging.basicConfig(
        filename=out / "in-process.log",
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    results = asyncio.run(run(names, args.duration, args.seed, out))
    print(markdown_table(results))
    if not args.out:
        for server_dir in out.glob("server*"):
            shutil.rmtree(server_dir, ignore_errors=True)
    return 1 if any(fig.violations() for fig in results) else 0


if __name__ == "__main__":
    sys.exit(main())
