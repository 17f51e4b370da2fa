"""pg_auto_failover doing the failover (Debian's ``postgresql-15-auto-failover``): a monitor and
two nodes of the test's own, each run by its ``pg_autoctl`` keeper; the primary's node (keeper
and server) is killed and the monitor, not the test, promotes the standby.

pg_autoctl refuses root: as root every ``pg_autoctl`` runs as the ``postgres`` user
(``runuser``), in a folder that user owns. The monitor is told to look every second and to give
a node up after 2 s (its defaults: every 5 s, 20 s), and to wait 3 s instead of 30 for the old
primary to demote itself before the new one takes writes (docs/scaling.md says what the
defaults give). Replication is synchronous (pg_auto_failover's default with one standby), and
the new primary takes writes alone once the monitor gives up on the old one (``wait_primary``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg

from .pgbouncer import free_port
from .replication import DEBIAN_BINDIR, execute, fetch, kill_server, lag

AUTOCTL = "pg_autoctl"
EXTENSION = Path("/usr/share/postgresql/15/extension/pgautofailover.control")
REQUIRE_ENV = "AKADZE_REQUIRE_AUTOFAILOVER"

#: the monitor's settings for a test that cannot wait half a minute (milliseconds)
_MONITOR_SETTINGS = {
    "pgautofailover.health_check_period": 1000,
    "pgautofailover.health_check_timeout": 1000,
    "pgautofailover.health_check_max_retries": 1,
    "pgautofailover.health_check_retry_delay": 500,
    "pgautofailover.node_considered_unhealthy_timeout": 2000,
    "pgautofailover.primary_demote_timeout": 3000,
}
#: states in which a node takes writes
_WRITABLE = ("wait_primary", "primary")


def missing() -> str | None:
    """Why pg_auto_failover cannot run here, or None."""
    if shutil.which(AUTOCTL) is None or not EXTENSION.is_file():
        return "pg_auto_failover is not installed (apt-get install postgresql-15-auto-failover)"
    if not (DEBIAN_BINDIR / "pg_ctl").is_file():
        return f"PostgreSQL 15 is not installed in {DEBIAN_BINDIR}"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "as root pg_autoctl runs as the 'postgres' user, and there is none"
    return None


def skip_or_fail() -> str | None:
    """The reason to skip, or None when it can run; raises where it must run (CI)."""
    reason = missing()
    if reason is not None and os.environ.get(REQUIRE_ENV):
        raise RuntimeError(f"{REQUIRE_ENV} is set but pg_auto_failover cannot run: {reason}")
    return reason


class Formation:
    """pg_auto_failover's monitor and two nodes on loopback ports; the first node starts as
    the primary."""

    synchronous = True
    manager = "pg_auto_failover's monitor"

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.monitor_port = free_port()
        self.ports = {"node1": free_port(), "node2": free_port()}
        self.primary, self.standby = "node1", "node2"
        self._keepers: dict[str, subprocess.Popen[bytes]] = {}
        self._ids: dict[str, int] = {}

    # -- running pg_autoctl ----------------------------------------------------------------------

    def _argv(self, *args: str) -> list[str]:
        env = {
            "PATH": f"{DEBIAN_BINDIR}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(self.folder),
            "XDG_CONFIG_HOME": str(self.folder / "config"),
            "XDG_DATA_HOME": str(self.folder / "data"),
            "XDG_RUNTIME_DIR": str(self.folder / "run"),
            "LC_ALL": "C",
        }
        command = ["env", *(f"{key}={value}" for key, value in env.items()), AUTOCTL, *args]
        return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command

    def _spawn(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        with (self.folder / f"{name}.log").open("ab") as log:
            return subprocess.Popen(
                self._argv(*args),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _pgdata(self, name: str) -> Path:
        return self.folder / name

    def monitor_dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.monitor_port}/pg_auto_failover"

    def _node_args(self, name: str) -> list[str]:
        monitor = f"postgres://autoctl_node@127.0.0.1:{self.monitor_port}/pg_auto_failover?sslmode=disable"
        return [
            "create", "postgres", "--pgdata", str(self._pgdata(name)), "--pgport", str(self.ports[name]),
            "--hostname", "127.0.0.1", "--listen", "127.0.0.1", "--name", name, "--monitor", monitor,
            "--auth", "trust", "--no-ssl", "--dbname", "akadze", "--run",
        ]  # fmt: skip

    # -- start and stop ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            account = pwd.getpwnam("postgres")
            os.chown(self.folder, account.pw_uid, account.pw_gid)
        created = await asyncio.to_thread(
            subprocess.run,
            self._argv(
                "create", "monitor", "--pgdata", str(self._pgdata("monitor")), "--pgport",
                str(self.monitor_port), "--hostname", "127.0.0.1", "--listen", "127.0.0.1",
                "--auth", "trust", "--no-ssl",
            ),
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        if created.returncode != 0:
            raise RuntimeError(f"pg_autoctl create monitor: {created.stderr[-2000:]}")
        self._keepers["monitor"] = self._spawn("monitor", "run", "--pgdata", str(self._pgdata("monitor")))
        await self._until(self._monitor_up, 60, "the monitor accepts connections")
        for setting, value in _MONITOR_SETTINGS.items():
            await execute(self.monitor_dsn(), f"ALTER SYSTEM SET {setting} = {value}")
        await execute(self.monitor_dsn(), "SELECT pg_reload_conf()")
        self._keepers["node1"] = self._spawn("node1", *self._node_args("node1"))
        await self._until(
            lambda: self._state_is("node1", ("single", *_WRITABLE)), 120, "node1 is the primary"
        )
        self._keepers["node2"] = self._spawn("node2", *self._node_args("node2"))

        async def both() -> bool:
            # the standby's base backup waits for a checkpoint (pg_autoctl asks for none)
            with contextlib.suppress(Exception):
                await execute(self.primary_dsn(), "CHECKPOINT")
            return await self._state_is("node1", ("primary",)) and await self._state_is(
                "node2", ("secondary",)
            )

        await self._until(both, 180, "node1 primary and node2 its secondary")
        rows = await fetch(self.monitor_dsn(), "SELECT nodename, nodeid FROM pgautofailover.node")
        self._ids = {row["nodename"]: row["nodeid"] for row in rows}

    def stop(self) -> None:
        for name, keeper in self._keepers.items():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(keeper.pid, signal.SIGKILL)
            pid = _postmaster(self._pgdata(name))
            if pid is not None:
                kill_server(pid)
            keeper.wait()

    # -- the cluster, as failover.py uses it -------------------------------------------------------

    @property
    def primary_name(self) -> str:
        return self.primary

    @property
    def standby_name(self) -> str:
        """The standby's application_name in the primary's pg_stat_replication."""
        return f"pgautofailover_standby_{self._ids[self.standby]}"

    def url(self, database: str) -> str:
        """The URL ``pg_autoctl show uri`` hands out (both nodes, read-write), with a user."""
        hosts = ",".join(f"127.0.0.1:{port}" for port in self.ports.values())
        return f"postgres://postgres@{hosts}/{database}?target_session_attrs=read-write&sslmode=prefer"

    def primary_dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.ports[self.primary]}/{database}"

    async def lag(self) -> dict[str, float]:
        return await lag(self.primary_dsn(), self.standby_name)

    async def fail_over(self, detect_s: float = 1.0, lag_s: float = 0.0) -> tuple[float, float]:
        """Kill the primary's node (its keeper, then its server, as the host's death would),
        and wait until the monitor has the standby take writes. ``detect_s`` is the monitor's;
        ``lag_s`` is not offered (the standby is synchronous)."""
        dead, keeper = self.primary, self._keepers[self.primary]
        killed = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(keeper.pid, signal.SIGSTOP)  # no keeper restarts the server meanwhile
        pid = _postmaster(self._pgdata(dead))
        if pid is not None:
            kill_server(pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(keeper.pid, signal.SIGKILL)
        await self._until(
            lambda: self._state_is(self.standby, _WRITABLE), 120, "the monitor promotes the standby"
        )
        promoted = time.monotonic()
        self.primary, self.standby = self.standby, self.primary
        return killed, promoted

    async def rejoin(self) -> None:
        raise NotImplementedError("one failover per formation: the dead node is not rebuilt")

    # -- helpers -----------------------------------------------------------------------------------

    async def _monitor_up(self) -> bool:
        try:
            conn = await asyncpg.connect(self.monitor_dsn(), timeout=2)
        except Exception:
            return False
        await conn.close()
        return True

    async def _state_is(self, name: str, states: tuple[str, ...]) -> bool:
        try:
            rows = await fetch(
                self.monitor_dsn(),
                "SELECT reportedstate::text AS s FROM pgautofailover.node WHERE nodename = $1",
                name,
            )
        except Exception:
            return False
        return bool(rows) and rows[0]["s"] in states

    async def _until(self, check: Callable[[], Awaitable[bool]], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if await check():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"pg_auto_failover: not the case after {timeout:.0f} s: {what}")
            await asyncio.sleep(0.05)


def _postmaster(pgdata: Path) -> int | None:
    try:
        return int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
