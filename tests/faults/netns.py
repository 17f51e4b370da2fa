"""Worker "hosts" in network namespaces of the test's own (issue 19, point 5).

Each host is a network namespace with a veth pair: the root side gets 10.x.y.(4k+1)/30, the
namespace side 10.x.y.(4k+2)/30 (a /24 that no interface of the machine uses, picked at random),
and the namespace's own loopback is up. PostgreSQL listens on 127.0.0.1 of the root namespace,
which a namespace cannot reach; a FaultProxy in the test's process, bound to the root side's
address of each pair, forwards to it. Each worker runs as
``ip netns exec NS unshare --uts sh -c 'hostname H && exec worker...'``: every program in the
chain execs the next, so the pid the test holds (and signals) is the worker's, and the worker
registers under a host name of its own. Only loopback and namespace-local addresses are used.

Namespaces are named ``akz<pid>h<k>`` (the test process's pid): they are deleted when the run
ends, whatever happens, and leftovers of runs whose process is gone are deleted at the start.
Deleting a namespace deletes its veth pair.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import random
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from . import checker
from .app import build
from .producer import Producer
from .proxy import FaultProxy
from .scenarios import Env, fetch, fetchval, registered, schedule_figures, stop_fleet, wait_for
from .supervisor import Supervisor, WorkerSpec

_NAME = re.compile(r"^akz(\d+)h\d+$")
_WORK_LEFT = "SELECT count(*) FROM akadze_jobs WHERE task = 'fault.work' AND state IN ('queued', 'running')"
_WORK_FAILED = "SELECT count(*) FROM akadze_jobs WHERE task = 'fault.work' AND state <> 'succeeded'"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20, check=check)


def unavailable() -> str | None:
    """Why worker hosts cannot be built here (None: they can)."""
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed"
    probe = f"akz{os.getpid()}h99"
    try:
        made = _ip("netns", "add", probe, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"`ip netns add` cannot run: {exc}"
    if made.returncode != 0:
        return f"`ip netns add` is not permitted here: {made.stderr.strip()}"
    _ip("netns", "del", probe, check=False)
    return None


def _forget_dead_runs() -> None:
    """Delete the namespaces of earlier runs whose test process is gone (a SIGKILLed pytest)."""
    for line in _ip("netns", "list").stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        match = _NAME.match(name)
        if match and not os.path.exists(f"/proc/{match.group(1)}"):
            _ip("netns", "del", name, check=False)


def _free_subnet() -> ipaddress.IPv4Network:
    """A 10.x.y.0/24 that no address or route of the machine touches."""
    taken = _ip("-4", "addr").stdout + _ip("-4", "route").stdout
    for _ in range(100):
        net = ipaddress.IPv4Network(f"10.{random.randint(200, 250)}.{random.randint(0, 255)}.0/24")
        if f"{'.'.join(str(net.network_address).split('.')[:3])}." not in taken:
            return net
    raise RuntimeError("no free 10.x.y.0/24 found for the namespaces")


@dataclass
class Host:
    """One worker host: a namespace, its addresses, its host name and its forwarder."""

    netns: str
    hostname: str
    outer: str
    inner: str
    forwarder: FaultProxy = field(repr=False)

    def prefix(self) -> list[str]:
        """Runs a command in the namespace under this host's name (each step execs the next)."""
        script = 'hostname "$0" && exec "$@"'
        return ["ip", "netns", "exec", self.netns, "unshare", "--uts", "sh", "-c", script, self.hostname]

    def url(self, database: str) -> str:
        return f"postgresql+asyncpg://postgres@{self.outer}:{self.forwarder.port}/{database}"

    def dsn(self, database: str) -> str:
        return f"postgresql://postgres@{self.outer}:{self.forwarder.port}/{database}"

    def reaches(self, address: str, port: int) -> bool:
        """Whether a TCP connection from inside the namespace to ``address:port`` opens."""
        code = (
            "import socket, sys; s = socket.socket(); s.settimeout(3); "
            "sys.exit(s.connect_ex((sys.argv[1], int(sys.argv[2]))))"
        )
        argv = ["ip", "netns", "exec", self.netns, "python3", "-c", code, address, str(port)]
        return subprocess.run(argv, capture_output=True, timeout=30, check=False).returncode == 0


class Hosts:
    """``async with Hosts(n, port) as hosts``: n namespaces, each forwarding to 127.0.0.1:port."""

    def __init__(self, count: int, target_port: int) -> None:
        self.count = count
        self.target_port = target_port
        self.hosts: list[Host] = []
        self._made: list[str] = []

    async def __aenter__(self) -> list[Host]:
        try:
            _forget_dead_runs()
            subnet = _free_subnet()
            for k in range(self.count):
                await self._add(k, subnet)
        except BaseException:
            await self.close()
            raise
        return self.hosts

    async def _add(self, k: int, subnet: ipaddress.IPv4Network) -> None:
        netns = f"akz{os.getpid()}h{k}"
        outer_if, inner_if = f"{netns}o", f"{netns}i"  # at most 15 characters
        outer, inner = str(subnet.network_address + 4 * k + 1), str(subnet.network_address + 4 * k + 2)
        _ip("netns", "add", netns)
        self._made.append(netns)
        _ip("link", "add", outer_if, "type", "veth", "peer", "name", inner_if, "netns", netns)
        _ip("addr", "add", f"{outer}/30", "dev", outer_if)
        _ip("link", "set", outer_if, "up")
        _ip("-n", netns, "addr", "add", f"{inner}/30", "dev", inner_if)
        _ip("-n", netns, "link", "set", inner_if, "up")
        _ip("-n", netns, "link", "set", "lo", "up")
        forwarder = FaultProxy("127.0.0.1", self.target_port)
        await forwarder.start(outer)
        self.hosts.append(Host(netns, f"akz-host{k + 1}", outer, inner, forwarder))

    async def close(self) -> None:
        for host in self.hosts:
            with contextlib.suppress(Exception):
                await host.forwarder.close()
        for netns in self._made:
            _ip("netns", "del", netns, check=False)
            _ip("link", "del", f"{netns}o", check=False)  # gone with the namespace, unless never moved

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


async def _started_on(dsn: str, pid: int) -> list[int]:
    """The work jobs (2 s each) running under the worker of ``pid`` whose task has started (in
    the ledger). Not the schedule's ticks: one of those, a few milliseconds long, could end
    between this query and the kill, and would never be run again by another host."""
    rows = await fetch(
        dsn,
        "SELECT j.id FROM akadze_jobs j JOIN akadze_workers w ON w.id = j.worker_id "
        "WHERE j.state = 'running' AND j.task = 'fault.work' AND w.pid = $1 "
        "AND EXISTS (SELECT 1 FROM chk_exec e "
        "  WHERE e.job_id = j.id AND e.run = j.run AND e.phase = 'start' AND e.pid = $1) ORDER BY j.id",
        pid,
    )
    return [row["id"] for row in rows]


async def hosts_chaos(
    env: Env,
    *,
    hosts: int = 3,
    jobs: int = 24,
    job_ms: int = 2000,
    every: float = 1.0,
    lost_after: float = 3.0,
    schedule_s: float = 12.0,
) -> checker.Figures:
    """Workers on ``hosts`` namespaces serve one queue and one schedule (every ``every`` s).
    Once the first host runs jobs it is SIGKILLed: the others must rescue its jobs, and every
    fire time of the schedule must become exactly one job, before and after the kill."""
    from akadze.testing import drain as drain_in_process

    assert env.server is not None
    started = time.monotonic()
    extra: dict[str, Any] = {"hosts": hosts}
    async with Hosts(hosts, env.server.port) as net:
        loopback = net[0].reaches("127.0.0.1", env.server.port)
        extra["PostgreSQL's loopback reachable from a namespace"] = loopback
        specs = [
            WorkerSpec(
                host.url(env.database),
                host.dsn(env.database),
                slots=4,
                lost_after=lost_after,
                extra_env={"AKADZE_FAULTS_SCHEDULE": str(every)},
                prefix=host.prefix(),
            )
            for host in net
        ]
        fleet = Supervisor(specs, hosts, env.folder / "logs", fault_dsn=env.dsn)
        app, ledger = build(env.url, env.dsn)
        producer = Producer(app)
        try:
            fleet.start()
            extra["registered"] = await registered(env.dsn, hosts, timeout=90)
            rows = await fetch(env.dsn, "SELECT host, pid FROM akadze_workers")
            extra["hosts registered"] = sorted(row["host"] for row in rows)
            extra["pids registered are the ones signalled"] = {row["pid"] for row in rows} == {
                w.pid for w in fleet.workers
            }
            await producer.enqueue("fault.work", [{"key": f"ns-{i}", "ms": job_ms} for i in range(jobs)])
            victim = fleet.workers[0]
            assert victim.pid is not None
            running: list[int] = []

            async def victim_runs() -> bool:
                running[:] = await _started_on(env.dsn, victim.pid or 0)
                return bool(running)

            await wait_for(victim_runs, timeout=30, interval=0.05)
            extra["jobs running on the killed host"] = len(running)
            await fleet.kill(victim)
            killed_at = time.monotonic()

            async def work_done() -> bool:
                return int(await fetchval(env.dsn, _WORK_LEFT)) == 0

            extra["work drained"] = await wait_for(work_done, timeout=60, interval=0.25)
            # the schedule runs on for schedule_s after the kill, on the hosts left
            await asyncio.sleep(max(0.0, schedule_s - (time.monotonic() - killed_at)))
            starts = await fetch(
                env.dsn,
                "SELECT job_id, worker FROM chk_exec WHERE phase = 'start' AND job_id = ANY($1::bigint[]) "
                "ORDER BY id",
                running,
            )
            last = {row["job_id"]: row["worker"] for row in starts}
            mine = f"{victim.name}#"  # the ledger's worker names are name#incarnation
            extra["killed host's jobs ended on another host"] = sum(
                1 for job_id in running if not last.get(job_id, mine).startswith(mine)
            )
            extra["work jobs not succeeded"] = int(await fetchval(env.dsn, _WORK_FAILED))
            extra |= await stop_fleet(fleet)  # restarts the killed host first: it rejoins
            await drain_in_process(app)  # the ticks enqueued last (a burst run fires nothing)
            extra |= await schedule_figures(env.dsn, every)
            extra["kills"] = fleet.kills
            extra["ERROR lines"] = sum(1 for line in fleet.logs().splitlines() if " ERROR " in line)
            extra["forwarded from"] = sorted(set().union(*(h.forwarder.peers for h in net)))
            extra["namespace addresses"] = sorted(h.inner for h in net)
        finally:
            await fleet.stop()
            await ledger.close()
            await app.dispose()
    fig = await checker.check(
        env.dsn,
        "worker hosts in network namespaces",
        produced=producer.log,
        all_logged=False,
        seconds=time.monotonic() - started,
    )
    fig.extra = extra
    fig.require(extra["jobs running on the killed host"] > 0, "the killed host was running jobs")
    fig.require(
        extra["killed host's jobs ended on another host"] == extra["jobs running on the killed host"],
        "every job of the killed host ran again on another host",
    )
    fig.require(extra["work jobs not succeeded"] == 0, "every job succeeded")
    fig.require(
        fig.rescue_max_s is None or fig.rescue_max_s <= lost_after * 1.5 + 3.0,
        "every rescue within lost_after + rescue interval + 3 s",
    )
    fig.require(extra["fire times without exactly one job"] == 0, "one job per fire time")
    fig.require(extra["missed fire times"] == 0, "no fire time missed")
    return fig
