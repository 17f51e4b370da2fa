"""One data dir's cluster on disk: its paths, its private socket dir, the lock that serializes
start and stop across processes, initdb and pg_ctl start.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from akadze.embedded.runner import Runner, check_private_to_root
from akadze.errors import EmbeddedPostgresError

logger = logging.getLogger("akadze.embedded")

#: The data dir format is tied to the PostgreSQL major, so the major names the directory.
PG_MAJOR = 18
PGDATA_ENV = "AKADZE_PGDATA"
PORT_ENV = "AKADZE_EMBEDDED_PG_PORT"
MAX_CONNECTIONS = 200
#: where root's data dirs go when the server runs as 'nobody', who cannot reach root's home
ROOT_DATA_ROOT = Path("/var/tmp/akadze-root")  # noqa: S108 (root-owned, checked before use)

#: Only names the socket file: each data dir has its own private socket dir, so servers never clash.
_SOCKET_PORT = 5432


def requested_port(port: int | None) -> int | None:
    """The TCP port asked for: ``port``, else ``$AKADZE_EMBEDDED_PG_PORT``, else None (the unix
    socket only). EmbeddedPostgresError when the variable is not a number."""
    if port is not None:
        return port
    configured = os.environ.get(PORT_ENV)
    if not configured:
        return None
    try:
        return int(configured)
    except ValueError:
        raise EmbeddedPostgresError(f"{PORT_ENV}={configured!r} is not a port number") from None


def socket_dir_for(pgdata: Path) -> Path:
    """``/tmp/akadze-<hash of pgdata's path>``, the server's socket dir. Unix socket paths are
    limited to ~104-107 bytes, so the socket cannot live in a deep (or space-containing, like
    macOS "Application Support") data dir."""
    digest = hashlib.sha256(str(pgdata).encode()).hexdigest()[:10]
    return Path("/tmp") / f"akadze-{digest}"  # noqa: S108 (mode 700 and ownership are checked)


def prepare_socket_dir(pgdata: Path, runner: Runner) -> Path:
    """Create ``pgdata``'s socket dir (mode 700; nobody's when the server runs as nobody) and
    return it. /tmp is shared: a path that is a symlink, another user's, or open to others raises
    EmbeddedPostgresError rather than be used."""
    socket_dir = socket_dir_for(pgdata)
    socket_dir.mkdir(mode=0o700, exist_ok=True)
    if runner.mode == "nobody":
        os.chown(socket_dir, runner.uid, runner.gid)
    owners = {os.geteuid(), runner.uid}
    info = socket_dir.lstat()
    if socket_dir.is_symlink() or info.st_uid not in owners or info.st_mode & 0o077:
        raise EmbeddedPostgresError(
            f"{socket_dir} exists but is not a private directory of this user: remove it and retry"
        )
    return socket_dir


def remove_socket_dir(pgdata: Path) -> None:
    """Remove ``pgdata``'s socket dir if it is empty. A clean shutdown removes the socket files;
    a dir not empty means a server still uses it, and it stays."""
    try:
        socket_dir_for(pgdata).rmdir()
    except OSError:
        pass


def prepare_pgdata(pgdata: Path, runner: Runner) -> None:
    """Create the directories above ``pgdata``. When the server runs as 'nobody', also create
    ``pgdata`` itself, nobody's, and (for the default data dir) the root-owned ROOT_DATA_ROOT.

    Raises:
        EmbeddedPostgresError: nobody cannot enter a directory above ``pgdata``, or
            ROOT_DATA_ROOT exists but is not root's alone.
    """
    if runner.mode == "nobody" and pgdata == ROOT_DATA_ROOT / f"pg{PG_MAJOR}":
        ROOT_DATA_ROOT.mkdir(mode=0o755, exist_ok=True)
        check_private_to_root(ROOT_DATA_ROOT)
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    if runner.mode != "nobody":
        return
    for parent in pgdata.parents:
        if not parent.stat().st_mode & 0o001:
            raise EmbeddedPostgresError(
                f"PostgreSQL runs as 'nobody' here and cannot enter {parent}: set "
                f"{PGDATA_ENV} to a directory under {ROOT_DATA_ROOT.parent}"
            )
    pgdata.mkdir(mode=0o700, exist_ok=True)
    os.chown(pgdata, runner.uid, runner.gid)


@contextmanager
def locked(pgdata: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``pgdata`` for the block, waiting for it without a timeout: start
    and stop of one data dir take turns across processes (two producers starting at once would
    both run initdb). The lock file sits beside the data dir because initdb wants the data dir
    itself empty, and it is never deleted, so every process locks the same inode."""
    import fcntl  # POSIX only; runner_for has already refused other systems

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    lock_path = pgdata.with_name(f".{pgdata.name}.lock")
    with open(lock_path, "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def initdb(pgdata: Path, runner: Runner, *, durable: bool) -> None:
    """Create a cluster in ``pgdata``: superuser postgres, trust auth, UTF8, C locale;
    ``durable=False`` skips syncing its files to disk. EmbeddedPostgresError (with initdb's
    output) when it fails."""
    command = ["initdb", "-D", str(pgdata), "-U", "postgres", "-A", "trust", "-E", "UTF8"]
    # --locale=C: the caller's locale may not exist on this machine, and C collation is what
    # a queue's text ordering should not depend on anyway.
    command += ["--locale=C", "--no-instructions"]
    if not durable:
        command.append("--no-sync")
    result = runner.run(command)
    if result.returncode != 0:
        raise EmbeddedPostgresError(
            f"initdb failed for {pgdata}:\n{(result.stderr or result.stdout).strip()}"
        )
    logger.info("initialized embedded PostgreSQL data dir %s", pgdata)


def pg_ctl_start(pgdata: Path, runner: Runner, socket_dir: Path, port: int | None, *, durable: bool) -> None:
    """Start the server on ``pgdata`` and wait up to 30 s until it accepts connections.

    It listens on ``socket_dir``, and on 127.0.0.1:``port`` only when a port is given; it logs to
    ``pgdata/server.log``. ``durable=False`` turns off fsync, synchronous commit and full page
    writes. EmbeddedPostgresError (pg_ctl's output and the log's last lines) when it did not start.
    """
    listen = "127.0.0.1" if port is not None else ""
    settings = {
        "listen_addresses": f"'{listen}'",
        "port": str(port if port is not None else _SOCKET_PORT),
        "unix_socket_directories": f"'{socket_dir}'",
        "max_connections": str(MAX_CONNECTIONS),
    }
    if not durable:
        settings |= {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
    options = " ".join(f"-c {name}={value}" for name, value in settings.items())
    log = pgdata / "server.log"
    result = runner.run(
        ["pg_ctl", "-D", str(pgdata), "-w", "-t", "30", "-l", str(log), "-o", options, "start"]
    )
    if result.returncode != 0:
        raise EmbeddedPostgresError(
            f"could not start embedded PostgreSQL at {pgdata}: "
            f"{(result.stderr or result.stdout).strip()}\n{_tail(log)}"
        )


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""
