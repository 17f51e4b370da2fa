"""What runs on a data dir: postmaster.pid read back, the server's state, waiting for it to
settle, the lock files an exited (zombie) server leaves, and the URLs that reach it.
"""

from __future__ import annotations

import enum
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from akadze.embedded.cluster import socket_dir_for
from akadze.embedded.runner import run_tool
from akadze.errors import EmbeddedPostgresError

logger = logging.getLogger("akadze.embedded")

_START_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Postmaster:
    """The parts of ``postmaster.pid`` we need; pid 0 while PostgreSQL is still writing it."""

    pid: int
    port: int
    socket_dir: str
    listen: str


class State(enum.Enum):
    """What holds a data dir, as inspect_pgdata sees it."""

    ABSENT = "absent"  #: no postmaster.pid, or its process is gone
    READY = "ready"  #: accepts connections
    BUSY = "busy"  #: alive but not accepting: starting, recovering or stopping
    ZOMBIE = "zombie"  #: exited but not reaped: pg_ctl still reports it as running


def read_postmaster(pgdata: Path) -> Postmaster | None:
    """``pgdata/postmaster.pid`` read back, or None when there is none; a file still being written
    reads as pid 0. EmbeddedPostgresError when it exists but cannot be read."""
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise EmbeddedPostgresError(f"cannot read {pgdata / 'postmaster.pid'}: {exc}") from exc
    lines += [""] * (6 - len(lines))
    try:
        # A negative pid marks a single-user backend, which holds the data dir just the same.
        pid, port = abs(int(lines[0])), int(lines[3])
    except ValueError:
        return Postmaster(0, 0, "", "")
    return Postmaster(pid, port, lines[4].strip(), lines[5].strip())


def process_state(pid: int) -> Literal["alive", "dead", "zombie"]:
    """Whether ``pid`` runs, is gone, or exited unreaped. When unsure it says alive: pid 0 (a
    postmaster.pid being written), another user's process, a zombie without procfs (macOS)."""
    if pid <= 0:
        return "alive"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "dead"
    except PermissionError:
        return "alive"
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "alive"  # no procfs (macOS): zombies cannot be told apart there
    return "zombie" if stat.rpartition(")")[2].split()[:1] == ["Z"] else "alive"


def _accepts_connections(bindir: Path, postmaster: Postmaster) -> bool:
    host = postmaster.socket_dir.split(",")[0].strip() or "127.0.0.1"
    command = [
        str(bindir / "pg_isready"),
        *("-h", host, "-p", str(postmaster.port), "-U", "postgres", "-d", "postgres", "-t", "3"),
    ]
    # pg_isready is a client: root may run it directly, whatever the server runs as.
    return run_tool(command, timeout=15).returncode == 0


def inspect_pgdata(pgdata: Path, bindir: Path) -> tuple[State, str | None]:
    """What holds ``pgdata`` now, and the server's URL when READY: by TCP if it listens on an
    address (``*`` is reached at 127.0.0.1), else by its first socket dir. Readiness is
    pg_isready's answer within 3 s. Changes nothing."""
    postmaster = read_postmaster(pgdata)
    if postmaster is None:
        return State.ABSENT, None
    process = process_state(postmaster.pid)
    if process == "dead":
        return State.ABSENT, None
    if process == "zombie":
        return State.ZOMBIE, None
    if postmaster.pid == 0 or not _accepts_connections(bindir, postmaster):
        return State.BUSY, None
    if postmaster.listen:
        address = postmaster.listen.split(",")[0].strip()
        return State.READY, tcp_url(postmaster.port, "127.0.0.1" if address == "*" else address)
    return State.READY, socket_url(Path(postmaster.socket_dir.split(",")[0].strip()))


def wait_for_settled(pgdata: Path, bindir: Path) -> str | None:
    """Return the URL of the running server, or None once nothing holds the data dir."""
    deadline = time.monotonic() + _START_TIMEOUT_S
    while True:
        state, url = inspect_pgdata(pgdata, bindir)
        if state is State.READY:
            return url
        if state is State.ABSENT:
            return None  # a stale postmaster.pid of a dead process is removed by postgres itself
        if state is State.ZOMBIE:
            postmaster = read_postmaster(pgdata)
            if postmaster is not None:
                remove_zombie_locks(pgdata, postmaster)
            return None
        if time.monotonic() > deadline:
            raise EmbeddedPostgresError(
                f"a PostgreSQL process holds {pgdata} but has not accepted connections for "
                f"{_START_TIMEOUT_S:.0f} s: see {pgdata / 'server.log'}"
            )
        time.sleep(0.1)


def remove_zombie_locks(pgdata: Path, postmaster: Postmaster) -> None:
    """Delete what an exited, unreaped server left: postmaster.pid, and each socket whose lock file
    names its pid. postgres would take the zombie's pid for a live postmaster and refuse to start
    until the zombie is reaped (seconds, or never under a PID 1 that does not reap). The shared
    memory interlock still guards against orphaned backends."""
    logger.info("removing lock files of exited PostgreSQL (pid %s) in %s", postmaster.pid, pgdata)
    listed = (entry.strip() for entry in postmaster.socket_dir.split(","))
    socket_dirs = {socket_dir_for(pgdata), *(Path(entry) for entry in listed if entry)}
    for socket_dir in socket_dirs:
        for lock in socket_dir.glob(".s.PGSQL.*.lock"):
            try:
                if lock.read_text().split()[:1] == [str(postmaster.pid)]:
                    lock.with_suffix("").unlink(missing_ok=True)
                    lock.unlink()
            except OSError:
                pass
    (pgdata / "postmaster.pid").unlink(missing_ok=True)


def socket_url(socket_dir: Path) -> str:
    """The URL of the server whose socket is in ``socket_dir`` (user postgres), in the form
    psql, asyncpg and ``Akadze(database_url=...)`` all take (``postgresql://``)."""
    return f"postgresql://postgres@/postgres?host={socket_dir}"


def tcp_url(port: int, host: str = "127.0.0.1") -> str:
    """The URL of the server at ``host``:``port`` (user postgres), as :func:`socket_url`."""
    return f"postgresql://postgres@{host}:{port}/postgres"
