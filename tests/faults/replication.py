"""A primary and a streaming standby of the test's own, from the machine's PostgreSQL binaries.

The failover and read-replica tests need real servers that replicate: ``initdb`` for the
primary, ``pg_basebackup -R`` for the standby (synchronous or not), then the primary killed
as its host's death would kill it (every process of the server SIGKILLed, nothing flushed or
said goodbye: ``kill_server``) and the standby promoted with
``pg_ctl promote``. The binaries are Debian's PostgreSQL 15 (``/usr/lib/postgresql/15/bin``,
or ``AKADZE_FAILOVER_BINDIR``); as root they run as the user that akadze's embedded runner
picks (a user namespace, else 'nobody'). Without them the tests skip, except where
``AKADZE_REQUIRE_FAILOVER`` is set (CI), where they fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from akadze.embedded.runner import Runner, runner_for

from .pgbouncer import free_port

DEBIAN_BINDIR = Path("/usr/lib/postgresql/15/bin")
BINDIR_ENV = "AKADZE_FAILOVER_BINDIR"
REQUIRE_ENV = "AKADZE_REQUIRE_FAILOVER"
_TOOLS = ("initdb", "pg_ctl", "pg_basebackup", "postgres")

#: every node's settings (the standby takes them with its base backup): durable, as a server
#: that fails over must be; WAL kept for a standby that falls behind; quick to notice a dead peer
_SETTINGS = """
listen_addresses = '127.0.0.1'
max_connections = 100
wal_level = replica
max_wal_senders = 10
max_replication_slots = 10
wal_keep_size = '256MB'
hot_standby = on
fsync = on
synchronous_commit = on
wal_receiver_timeout = '5s'
wal_sender_timeout = '5s'
wal_retrieve_retry_interval = '200ms'
log_min_messages = warning
log_line_prefix = '%m [%p] '
"""


def bindir() -> Path:
    return Path(os.environ.get(BINDIR_ENV) or DEBIAN_BINDIR)


def missing() -> str | None:
    """Why the replicated servers cannot run here, or None."""
    folder = bindir()
    absent = [tool for tool in _TOOLS if not (folder / tool).is_file()]
    if absent:
        return (
            f"{', '.join(absent)} not found in {folder} (apt-get install postgresql-15, or set {BINDIR_ENV})"
        )
    return None


def skip_or_fail() -> str | None:
    """The reason to skip, or None when the tests can run; raises where they must run (CI)."""
    reason = missing()
    if reason is not None and os.environ.get(REQUIRE_ENV):
        raise RuntimeError(f"{REQUIRE_ENV} is set but the replicated servers cannot run: {reason}")
    return reason


@dataclass
class Node:
    """One server: its data folder, port and log."""

    name: str
    folder: Path
    port: int
    runner: Runner

    @property
    def pgdata(self) -> Path:
        return self.folder / self.name

    @property
    def log(self) -> Path:
        return self.folder / f"{self.name}.log"

    @property
    def socket_dir(self) -> Path:
        return self.folder / f"{self.name}.sock"

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, argv: list[str], what: str, timeout: float = 120.0) -> str:
        result = self.runner.run(argv, timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"{what} ({self.name}): {(result.stderr or result.stdout).strip()}")
        return result.stdout

    def initdb(self) -> None:
        self._run(
            [
                "initdb",
                "-D",
                str(self.pgdata),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-instructions",
            ],
            "initdb",
        )
        with (self.pgdata / "postgresql.conf").open("a") as conf:
            conf.write(_SETTINGS)
        with (self.pgdata / "pg_hba.conf").open("a") as hba:
            hba.write("host replication postgres 127.0.0.1/32 trust\n")

    def base_backup(self, source: Node) -> None:
        """A standby of ``source``: its data copied with the WAL streamed, and told to follow."""
        if self.pgdata.exists():
            shutil.rmtree(self.pgdata)
        conninfo = f"host=127.0.0.1 port={source.port} user=postgres application_name={self.name}"
        self._run(
            ["pg_basebackup", "-d", conninfo, "-D", str(self.pgdata), "-R", "-X", "stream", "-c", "fast"],
            "pg_basebackup",
        )

    def start(self) -> None:
        self.socket_dir.mkdir(exist_ok=True)
        if self.runner.mode == "nobody":
            os.chown(self.socket_dir, self.runner.uid, self.runner.gid)
        options = f"-c port={self.port} -c unix_socket_directories='{self.socket_dir}'"
        self._run(
            ["pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "-l", str(self.log), "-o", options, "start"],
            "pg_ctl start",
        )

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    async def kill(self) -> None:
        """Kill the whole server as its host's death would (kill_server), and wait until the
        postmaster is dead (a zombie or gone: its sockets are closed)."""
        pid = self.postmaster_pid()
        if pid is None:
            return
        kill_server(pid)
        deadline = time.monotonic() + 10
        while _running(pid) and time.monotonic() < deadline:
            await asyncio.sleep(0.005)

    def promote(self) -> None:
        self._run(["pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "promote"], "pg_ctl promote")

    def stop(self) -> None:
        """Best effort, for cleanup: an immediate stop, then a kill."""
        if self.postmaster_pid() is None:
            return
        try:
            self.runner.run(["pg_ctl", "-D", str(self.pgdata), "-w", "-t", "20", "-m", "immediate", "stop"])
        except Exception:  # noqa: S110 (cleanup: the kill below ends it anyway)
            pass
        pid = self.postmaster_pid()
        if pid is not None and _running(pid):
            kill_server(pid)


class Pair:
    """A primary and one standby, which swap roles at each failover."""

    def __init__(self, folder: Path, *, synchronous: bool) -> None:
        runner = runner_for(bindir())
        folder.mkdir(parents=True, exist_ok=True)
        if runner.mode == "nobody":
            os.chown(folder, runner.uid, runner.gid)
        self.folder = folder
        self.synchronous = synchronous
        self.primary = Node("a", folder, free_port(), runner)
        self.standby = Node("b", folder, free_port(), runner)
        #: (kill, promote) monotonic times of each failover
        self.failovers: list[tuple[float, float]] = []

    @property
    def nodes(self) -> list[Node]:
        return sorted([self.primary, self.standby], key=lambda node: node.name)

    def primary_dsn(self, database: str = "postgres") -> str:
        """A direct DSN of today's primary."""
        return self.primary.dsn(database)

    @property
    def standby_name(self) -> str:
        """The standby's application_name in the primary's pg_stat_replication."""
        return self.standby.name

    @property
    def primary_name(self) -> str:
        return self.primary.name

    @property
    def manager(self) -> str:
        """Who fails over: the test itself (kill, a detection delay, pg_ctl promote)."""
        return "the test (pg_ctl promote)"

    def url(self, database: str, *, query: str = "target_session_attrs=read-write") -> str:
        """akadze's URL of both servers, in a fixed order: the primary is whichever accepts."""
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in self.nodes)
        return f"postgresql://postgres@{hosts}/{database}" + (f"?{query}" if query else "")

    async def start(self) -> None:
        self.primary.initdb()
        self.primary.start()
        await self._attach_standby()

    async def _attach_standby(self) -> None:
        self.standby.base_backup(self.primary)
        self.standby.start()
        if self.synchronous:
            await execute(
                self.primary.dsn(), f"ALTER SYSTEM SET synchronous_standby_names = '{self.standby.name}'"
            )
        else:
            await execute(self.primary.dsn(), "ALTER SYSTEM RESET synchronous_standby_names")
        await execute(self.primary.dsn(), "SELECT pg_reload_conf()")
        await self.wait_streaming()

    async def wait_streaming(self, timeout: float = 60.0) -> None:
        """Until the standby streams (and, when synchronous, is the synchronous one)."""
        wanted = "sync" if self.synchronous else "async"
        deadline = time.monotonic() + timeout
        while True:
            rows = await fetch(
                self.primary.dsn(),
                "SELECT sync_state FROM pg_stat_replication "
                "WHERE application_name = $1 AND state = 'streaming'",
                self.standby.name,
            )
            if rows and rows[0]["sync_state"] == wanted:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"standby {self.standby.name} is not streaming ({wanted}) after {timeout} s"
                )
            await asyncio.sleep(0.1)

    async def wait_replayed(self, timeout: float = 30.0) -> None:
        """Until the standby has replayed everything the primary wrote so far."""
        target = (await fetch(self.primary_dsn(), "SELECT pg_current_wal_lsn()::text AS lsn"))[0]["lsn"]
        deadline = time.monotonic() + timeout
        while True:
            rows = await fetch(
                self.standby.dsn(), "SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn AS done", target
            )
            if rows[0]["done"]:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the standby has not replayed up to {target} after {timeout} s")
            await asyncio.sleep(0.05)

    async def lag(self) -> dict[str, float]:
        """The standby's lag behind the primary now (replication.lag)."""
        return await lag(self.primary_dsn(), self.standby_name)

    async def fail_over(self, detect_s: float = 1.0, lag_s: float = 0.0) -> tuple[float, float]:
        """Kill the primary, wait ``detect_s`` (a failover manager's detection), promote the
        standby; the roles swap. Returns the monotonic times of the kill and of the promotion.

        ``lag_s``: the standby is that far behind at the kill. The primary's WAL sender is
        stopped (SIGSTOP) that long before it, so what commits meanwhile never leaves the
        primary, as over a slow link (with synchronous replication those commits wait)."""
        if lag_s:
            senders = [pid for pid in _children(self.primary.postmaster_pid() or 0) if _is_walsender(pid)]
            for pid in senders:
                os.kill(pid, signal.SIGSTOP)
            await asyncio.sleep(lag_s)
        killed = time.monotonic()
        await self.primary.kill()
        await asyncio.sleep(detect_s)
        await asyncio.to_thread(self.standby.promote)
        promoted = time.monotonic()
        self.primary, self.standby = self.standby, self.primary
        self.failovers.append((killed, promoted))
        return killed, promoted

    async def rejoin(self) -> None:
        """Make the dead old primary a standby of the new one again (a fresh base backup)."""
        await self._attach_standby()

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def kill_server(postmaster: int) -> None:
    """SIGKILL a PostgreSQL server and every process of it, with no chance to answer anyone:
    the postmaster is stopped first (it forks no new backend), then each of its children is
    killed, then it. Its children are sessions of their own (PostgreSQL calls setsid in each),
    so a signal to the postmaster's process group would leave them serving their clients."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(postmaster, signal.SIGSTOP)
    for child in _children(postmaster):
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(postmaster, signal.SIGKILL)


def processes() -> dict[int, list[bytes]]:
    """Every process by pid, with the fields of its /proc/<pid>/stat after the command name
    (state, ppid, ...: field 3 onwards of proc(5))."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            data = (entry / "stat").read_bytes()
        except OSError:
            continue
        found[int(entry.name)] = data[data.rindex(b")") + 2 :].split()
    return found


def _children(parent: int) -> list[int]:
    return [pid for pid, fields in processes().items() if int(fields[1]) == parent]


def _is_walsender(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"postgres: walsender")
    except OSError:
        return False


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return False
    return data[data.rindex(b")") + 2 : data.rindex(b")") + 3] not in (b"Z", b"X")


@contextlib.asynccontextmanager
async def running_pair(*, synchronous: bool, prefix: str = "akadze-failover-") -> AsyncIterator[Pair]:
    """A started Pair in a folder of its own, with an empty database ``akadze``; stopped and
    removed after the block."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    pair = Pair(folder / "servers", synchronous=synchronous)
    try:
        await pair.start()
        await execute(pair.primary_dsn(), "CREATE DATABASE akadze")
        yield pair
    finally:
        pair.stop()
        shutil.rmtree(folder, ignore_errors=True)


async def lag(dsn: str, standby: str) -> dict[str, float]:
    """How far the standby named ``standby`` is behind the primary at ``dsn`` now: bytes not
    yet flushed or replayed there, and the server's own time lags (seconds, 0 when idle)."""
    rows = await fetch(
        dsn,
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), flush_lsn)::float8 AS flush_bytes, "
        "pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::float8 AS replay_bytes, "
        "COALESCE(extract(epoch FROM flush_lag), 0)::float8 AS flush_s, "
        "COALESCE(extract(epoch FROM replay_lag), 0)::float8 AS replay_s "
        "FROM pg_stat_replication WHERE application_name = $1",
        standby,
    )
    return dict(rows[0]) if rows else {}


async def execute(dsn: str, statement: str) -> None:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


async def fetch(dsn: str, query: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        return list(await conn.fetch(query, *args))
    finally:
        await conn.close()
