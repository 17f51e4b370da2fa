"""Debian's pgbouncer on loopback, in transaction mode, never as root.

PgBouncer refuses uid 0: as root it runs inside a fresh user namespace (``unshare --user``,
where it sees uid 65534), or as ``nobody`` (``-u nobody``) when namespaces are unavailable.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

#: where Debian and others install daemons: a normal user's PATH often lacks them
SBIN = os.pathsep.join(("/usr/sbin", "/usr/local/sbin", "/sbin"))


def binary() -> str | None:
    """The pgbouncer executable: on PATH, else where Debian installs it (/usr/sbin), which a
    normal user's PATH often leaves out; None when it is nowhere."""
    return shutil.which("pgbouncer") or shutil.which("pgbouncer", path=SBIN)


def available() -> bool:
    """Whether pgbouncer is installed (on PATH or in an sbin folder)."""
    return binary() is not None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PgBouncer:
    def __init__(
        self,
        folder: Path,
        upstream_host: str,
        upstream_port: int,
        *,
        pool_mode: str = "transaction",
        pool_size: int = 4,
    ) -> None:
        self.folder = folder
        self.upstream = (upstream_host, upstream_port)
        self.pool_mode = pool_mode
        self.pool_size = pool_size
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def log_path(self) -> Path:
        return self.folder / "pgbouncer.log"

    def _write_config(self) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o755)  # noqa: S103 (nobody, in the fallback, reads the config)
        userlist = self.folder / "userlist.txt"
        userlist.write_text('"postgres" ""\n')
        host, port = self.upstream
        config = self.folder / "pgbouncer.ini"
        config.write_text(
            "[databases]\n"
            f"* = host={host} port={port}\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {userlist}\n"
            f"pool_mode = {self.pool_mode}\n"
            "max_client_conn = 200\n"
            f"default_pool_size = {self.pool_size}\n"
            f"logfile = {self.log_path}\n"
            "admin_users = postgres\n"
            "ignore_startup_parameters = extra_float_digits\n"
        )
        for path in (userlist, config):
            os.chmod(path, 0o644)
        self.log_path.touch()
        os.chmod(self.log_path, 0o666)  # noqa: S103 (nobody, in the fallback, writes the log)
        return config

    def _argv(self, config: Path) -> list[str]:
        executable = binary() or "pgbouncer"
        if os.geteuid() != 0:
            return [executable, str(config)]
        unshare = shutil.which("unshare")
        if unshare and subprocess.run([unshare, "--user", "true"], check=False).returncode == 0:
            return [unshare, "--user", executable, str(config)]
        return [executable, "-u", "nobody", str(config)]

    async def start(self, timeout: float = 15.0) -> int:
        self.port = free_port()
        config = self._write_config()
        self.proc = subprocess.Popen(
            self._argv(config),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"pgbouncer exited with {self.proc.returncode}: {self.log()[-2000:]}")
            try:
                _reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
            except OSError:
                await asyncio.sleep(0.1)
                continue
            writer.close()
            return self.port
        raise RuntimeError(f"pgbouncer did not listen within {timeout}s: {self.log()[-2000:]}")

    async def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            deadline = time.monotonic() + 10
            while self.proc.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""
