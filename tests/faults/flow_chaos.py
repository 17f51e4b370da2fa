"""Flow control under faults (issue 32, point 5): limits, unique jobs and a queue pause while
worker processes of tests/apps/flow.py are SIGKILLed and started again.

Each scenario measures from outside the queue's own bookkeeping where it can: a sampler reads
the running jobs every 100 ms, the runs write their spans (tests/apps/flow.py: the claim's
clock, the body's start and end), and the harness times the pause's commit. The CI sizes are in
tests/faults/test_flow_chaos.py; ``python -m tests.faults.chaos --scenario flow-keyed`` (and
flow-rate, flow-unique, flow-pause) runs the long ones.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg

from tests.apps.flow import SPANS_DDL, create_app

from .checker import Figures
from .scenarios import Env, fetch, fetchval, wait_for

ROOT = Path(__file__).resolve().parents[2]
_CLI = "import sys; from akadze.cli import main; sys.argv[0] = 'akadze'; main()"


class Workers:
    """Worker processes of tests/apps/flow.py, each in its own session (so a SIGKILL takes it
    alone), logging to the scenario folder."""

    def __init__(self, url: str, folder: Path) -> None:
        self.url = url
        self.folder = folder
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.kills = 0

    def start(self, name: str, *, slots: int = 4, lost_after: float = 2.0, poll: float = 0.2) -> int:
        """Start worker ``name`` (again, after a kill: its log goes on)."""
        argv = [sys.executable, "-c", _CLI, "worker", "tests.apps.flow:app", "-q", "flow"]
        argv += ["--slots", str(slots), "--lost-after", str(lost_after), "--poll-interval", str(poll)]
        env = dict(os.environ, AKADZE_DATABASE_URL=self.url, PYTHONUNBUFFERED="1")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        with (self.folder / f"{name}.log").open("ab") as log:
            proc = subprocess.Popen(
                argv, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.procs[name] = proc
        return proc.pid

    def kill(self, name: str) -> None:
        os.killpg(self.procs[name].pid, signal.SIGKILL)
        self.procs[name].wait()
        self.kills += 1

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@contextmanager
def workers(url: str, folder: Path) -> Iterator[Workers]:
    fleet = Workers(url, folder)
    try:
        yield fleet
    finally:
        fleet.stop_all()


async def prepare_spans(dsn: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(SPANS_DDL)
    finally:
        await conn.close()


async def all_done(dsn: str, timeout: float) -> None:
    async def done() -> bool:
        return not await fetchval(
            dsn, "SELECT count(*) FROM akadze_jobs WHERE state IN ('queued', 'running')"
        )

    assert await wait_for(done, timeout, interval=0.2), "jobs left unfinished"
    states = await fetch(dsn, "SELECT state, count(*) FROM akadze_jobs GROUP BY 1")
    assert {r[0] for r in states} == {"succeeded"}, states


def max_overlap(spans: Sequence[tuple[datetime, datetime]]) -> int:
    """The most spans open at one instant (an end before a start at the same instant)."""
    events = sorted(
        [(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans], key=lambda e: (e[0], e[1])
    )
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


async def spans_of(
    dsn: str, task: str, key: str | None = None, pids: Sequence[int] | None = None
) -> list[Any]:
    rows = await fetch(
        dsn,
        "SELECT started_at, ended_at, pid FROM flow_spans WHERE task = $1 AND ($2::text IS NULL OR key = $2) "
        "AND ended_at IS NOT NULL ORDER BY started_at",
        task,
        key,
    )
    return [r for r in rows if pids is None or r["pid"] in pids]


def busiest_window(times: Sequence[datetime], window: timedelta) -> int:
    """The most of ``times`` in any half-open window [t, t + window) starting at one of them."""
    ordered = sorted(times)
    most = 0
    first = 0
    for last, at in enumerate(ordered):
        while ordered[first] <= at - window:
            first += 1
        most = max(most, last - first + 1)
    return most


class Sampler:
    """Runs ``query`` every ``every`` seconds on one connection until stopped; keeps each
    sample's rows (the harness's view, independent of the workers)."""

    def __init__(self, dsn: str, query: str, every: float = 0.1) -> None:
        self.dsn = dsn
        self.query = query
        self.every = every
        self.samples: list[list[Any]] = []
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Sampler:
        conn = await asyncpg.connect(self.dsn)

        async def loop() -> None:
            try:
                while True:
                    self.samples.append(list(await conn.fetch(self.query)))
                    await asyncio.sleep(self.every)
            finally:
                await conn.close()

        self._task = asyncio.create_task(loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass


async def chaos_kills(
    fleet: Workers, names: Sequence[str], seconds: float, every: tuple[float, float], rng: random.Random
) -> None:
    """SIGKILL a random worker every ``every`` seconds for ``seconds``; start it again 0.3 s on."""
    began = time.monotonic()
    while time.monotonic() - began < seconds:
        await asyncio.sleep(rng.uniform(*every))
        victim = rng.choice(list(names))
        fleet.kill(victim)
        await asyncio.sleep(0.3)
        fleet.start(victim)


# -- 1. a keyed concurrency limit --------------------------------------------------------


async def keyed_limit_chaos(
    env: Env,
    *,
    seconds: float = 20.0,
    accounts: int = 6,
    per_account: int = 30,
    workers_n: int = 3,
    kill_every: tuple[float, float] = (2.0, 4.0),
    seed: int | None = None,
) -> Figures:
    """flow.keyed (concurrency 2 per account) under SIGKILL chaos: the running jobs of each
    account, sampled every 100 ms, never pass 2, nor do the bodies that ran (their spans)."""
    seed = seed if seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    began = time.monotonic()
    await prepare_spans(env.dsn)
    app = create_app(env.url)
    try:
        items = [
            {"account": f"a{a}", "n": n, "ms": rng.randint(50, 300)}
            for n in range(per_account)
            for a in range(accounts)
        ]
        await app.tasks["flow.keyed"].enqueue_many(items)
    finally:
        await app.dispose()
    names = [f"w{i}" for i in range(workers_n)]
    query = (
        "SELECT args->>'account' AS k, count(*) AS n FROM akadze_jobs "
        "WHERE task = 'flow.keyed' AND state = 'running' GROUP BY 1"
    )
    with workers(env.url, env.folder) as fleet:
        for name in names:
            fleet.start(name)
        async with Sampler(env.dsn, query) as sampler:
            await chaos_kills(fleet, names, seconds, kill_every, rng)
            await all_done(env.dsn, 180)
    sampled = max((row["n"] for sample in sampler.samples for row in sample), default=0)
    spans = max(
        [
            max_overlap([(r[0], r[1]) for r in await spans_of(env.dsn, "flow.keyed", f"a{a}")])
            for a in range(accounts)
        ]
    )
    fig = Figures("keyed limit (2 per key) under SIGKILL", jobs=len(items), succeeded=len(items))
    fig.seconds = time.monotonic() - began
    fig.faults = fleet.kills
    fig.extra = {
        "seed": seed,
        "kills": fleet.kills,
        "samples (100 ms)": len(sampler.samples),
        "most running of one key (sampled)": sampled,
        "most bodies of one key at once (spans)": spans,
    }
    fig.require(sampled <= 2, "never more than 2 running jobs of one key in any sample")
    fig.require(spans <= 2, "never more than 2 bodies of one key at once")
    fig.require(fleet.kills > 0, "at least one SIGKILL")
    return fig


# -- 2. a rate limit ---------------------------------------------------------------------


async def rate_limit_chaos(
    env: Env, *, jobs: int = 40, workers_n: int = 3, kills: int = 2, seed: int | None = None
) -> Figures:
    """flow.rate (5 starts per second) while workers are SIGKILLed: no window of one second
    holds more than 5 claims (every run's claim, on the claim's clock), before or after a kill."""
    seed = seed if seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    began = time.monotonic()
    await prepare_spans(env.dsn)
    app = create_app(env.url)
    try:
        await app.tasks["flow.rate"].enqueue_many([{"n": n} for n in range(jobs)])
    finally:
        await app.dispose()
    names = [f"w{i}" for i in range(workers_n)]
    kill_times: list[datetime] = []
    with workers(env.url, env.folder) as fleet:
        for name in names:
            fleet.start(name, poll=0.1)
        for _ in range(kills):
            await asyncio.sleep(rng.uniform(1.5, 2.5))
            victim = rng.choice(names)
            fleet.kill(victim)
            kill_times.append(await fetchval(env.dsn, "SELECT clock_timestamp()"))
            await asyncio.sleep(0.3)
            fleet.start(victim, poll=0.1)
        await all_done(env.dsn, 120)
    claims = [
        r[0] for r in await fetch(env.dsn, "SELECT claimed_at FROM flow_spans WHERE task = 'flow.rate'")
    ]
    window = timedelta(seconds=1)
    after_kill = [at for at in claims if kill_times and at >= kill_times[0]]
    fig = Figures("rate limit (5/s) under SIGKILL", jobs=jobs, succeeded=jobs)
    fig.seconds = time.monotonic() - began
    fig.faults = fleet.kills
    busiest = busiest_window(claims, window)
    busiest_after = busiest_window(after_kill, window) if after_kill else 0
    fig.extra = {
        "seed": seed,
        "kills": fleet.kills,
        "runs (claims)": len(claims),
        "most claims in 1 s": busiest,
        "most claims in 1 s after the first kill": busiest_after,
    }
    fig.require(busiest <= 5, "never more than 5 claims in any 1 s window")
    fig.require(busiest_after <= 5, "never more than 5 claims in 1 s after a kill")
    fig.require(len(after_kill) > 0, "claims after the first kill")
    return fig


# -- 3. unique jobs from concurrent producers --------------------------------------------


async def unique_chaos(
    env: Env,
    *,
    seconds: float = 15.0,
    producers: int = 8,
    keys: int = 5,
    workers_n: int = 3,
    kill_every: tuple[float, float] = (2.0, 4.0),
    seed: int | None = None,
) -> Figures:
    """Producers enqueue flow.report (unique per account) at once while workers run and are
    SIGKILLed (a rescue puts a running job back to queued under its key): at every sample at
    most one job per key is queued or running, and every job ends succeeded."""
    seed = seed if seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    began = time.monotonic()
    names = [f"w{i}" for i in range(workers_n)]
    query = (
        "SELECT unique_key, count(*) AS n FROM akadze_jobs WHERE task = 'flow.report' "
        "AND state IN ('queued', 'running') GROUP BY 1 HAVING count(*) > 1"
    )
    inserted = duplicates = 0

    async def produce(index: int) -> None:
        nonlocal inserted, duplicates
        app = create_app(env.url)
        local = random.Random(seed + index)
        try:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                job = await app.tasks["flow.report"].enqueue(
                    account=local.randrange(keys), note=str(index), ms=local.randint(0, 200)
                )
                if job.duplicate:
                    duplicates += 1
                else:
                    inserted += 1
                await asyncio.sleep(local.uniform(0.0, 0.02))
        finally:
            await app.dispose()

    with workers(env.url, env.folder) as fleet:
        for name in names:
            fleet.start(name)
        async with Sampler(env.dsn, query) as sampler:
            await asyncio.gather(
                chaos_kills(fleet, names, seconds, kill_every, rng), *(produce(i) for i in range(producers))
            )
            await all_done(env.dsn, 120)
    twins = sum(len(sample) for sample in sampler.samples)
    rows = await fetchval(env.dsn, "SELECT count(*) FROM akadze_jobs WHERE task = 'flow.report'")
    fig = Figures("unique jobs from concurrent producers under SIGKILL", jobs=rows, succeeded=rows)
    fig.seconds = time.monotonic() - began
    fig.faults = fleet.kills
    fig.extra = {
        "seed": seed,
        "kills": fleet.kills,
        "producers": producers,
        "inserted": inserted,
        "duplicates returned": duplicates,
        "samples (100 ms)": len(sampler.samples),
        "samples with two jobs of one key": twins,
    }
    fig.require(twins == 0, "never two queued or running jobs of one key")
    fig.require(rows == inserted, "one row per inserted job")
    fig.require(fleet.kills > 0, "at least one SIGKILL")
    return fig


# -- 4. a queue pause --------------------------------------------------------------------


async def pause_chaos(
    env: Env, *, jobs: int = 300, workers_n: int = 3, poll: float = 0.2, paused_s: float = 3.0
) -> Figures:
    """Workers drain flow.free; the queue is paused while they run, one worker is SIGKILLed and
    started again while it is paused: no claim after the pause committed plus the poll interval
    (none after the commit itself, since a claim reads the pause in its snapshot), then resume
    and every job ends."""
    began = time.monotonic()
    await prepare_spans(env.dsn)
    app = create_app(env.url)
    try:
        await app.tasks["flow.free"].enqueue_many([{"n": n, "ms": 50} for n in range(jobs)])
        names = [f"w{i}" for i in range(workers_n)]
        with workers(env.url, env.folder) as fleet:
            for name in names:
                fleet.start(name, poll=poll)

            async def some_ran() -> bool:
                return bool(await fetchval(env.dsn, "SELECT count(*) >= 20 FROM flow_spans"))

            assert await wait_for(some_ran, 60)
            await app.pause_queue("flow")
            paused_at = await fetchval(env.dsn, "SELECT clock_timestamp()")
            await asyncio.sleep(paused_s / 2)
            fleet.kill(names[0])
            fleet.start(names[0], poll=poll)
            await asyncio.sleep(paused_s / 2)
            left = await fetchval(env.dsn, "SELECT count(*) FROM akadze_jobs WHERE state = 'queued'")
            resuming_at = await fetchval(env.dsn, "SELECT clock_timestamp()")
            await app.resume_queue("flow")
            await all_done(env.dsn, 120)
    finally:
        await app.dispose()
    claims = [r[0] for r in await fetch(env.dsn, "SELECT claimed_at FROM flow_spans")]
    after_commit = sum(1 for at in claims if paused_at < at < resuming_at)
    after_poll = sum(1 for at in claims if paused_at + timedelta(seconds=poll) < at < resuming_at)
    resumed = sum(1 for at in claims if at >= resuming_at)
    fig = Figures("queue pause under SIGKILL", jobs=jobs, succeeded=jobs)
    fig.seconds = time.monotonic() - began
    fig.faults = fleet.kills
    fig.extra = {
        "kills": fleet.kills,
        "jobs queued while paused": left,
        "claims while paused, past the poll interval": after_poll,
        "claims while paused, after the pause's commit": after_commit,
        "claims after resume": resumed,
    }
    fig.require(after_poll == 0, "no claim from the paused queue after the poll interval")
    # (a job rescued from the killed worker ran again after the resume too)
    fig.require(left > 0 and resumed >= left, "the jobs held by the pause ran after the resume")
    return fig
