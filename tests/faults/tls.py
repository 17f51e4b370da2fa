"""A throwaway PostgreSQL that takes TCP connections over TLS only, with a self-signed
certificate for 127.0.0.1 made by the openssl command line (for the URL parameter tests).

The embedded server's wheel is built without SSL, so this runs the machine's own PostgreSQL
binaries (``pg_config --bindir``, or /usr/lib/postgresql/*/bin); as root, as the ``postgres``
account. Tests skip when neither openssl nor such binaries are there.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
from pathlib import Path
from typing import Any

import asyncpg

from .pgbouncer import free_port

HBA = """\
local all all trust
hostssl all all 127.0.0.1/32 trust
hostnossl all all 127.0.0.1/32 reject
"""


def system_bindir() -> Path | None:
    """The machine's PostgreSQL binaries, if any."""
    config = shutil.which("pg_config")
    if config:
        found = subprocess.run(
            [config, "--bindir"], capture_output=True, text=True, check=False
        ).stdout.strip()
        if found and (Path(found) / "initdb").exists():
            return Path(found)
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


def available() -> str | None:
    """Why the TLS server cannot run here, or None."""
    if shutil.which("openssl") is None:
        return "the openssl command line is needed to make a certificate"
    if system_bindir() is None:
        return "no PostgreSQL binaries with SSL on this machine (the embedded one has none)"
    return None


def make_certificate(folder: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate (its own root) for 127.0.0.1, and its key."""
    cert, key = folder / f"{name}.crt", folder / f"{name}.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    key.chmod(0o600)
    cert.chmod(0o644)
    return cert, key


class TlsServer:
    """``root_cert`` verifies the server; ``other_cert`` is a root that does not."""

    def __init__(self, folder: Path) -> None:
        bindir = system_bindir()
        assert bindir is not None, available()
        self.bindir = bindir
        self.folder = folder
        self.pgdata = folder / "pgdata"
        self.port = free_port()
        self.root_cert = folder / "server.crt"
        self.other_cert = folder / "other.crt"
        self._account = pwd.getpwnam("postgres") if os.geteuid() == 0 else None

    def _run(self, *argv: str) -> None:
        kwargs: dict[str, Any] = {}
        if self._account is not None:
            kwargs = {"user": self._account.pw_uid, "group": self._account.pw_gid, "extra_groups": []}
        result = subprocess.run(
            [str(self.bindir / argv[0]), *argv[1:]], capture_output=True, text=True, check=False, **kwargs
        )
        if result.returncode != 0:
            raise RuntimeError(f"{argv[0]}: {result.stderr or result.stdout}")

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        make_certificate(self.folder, "other")
        cert, key = make_certificate(self.folder, "server")
        if self._account is not None:
            for path in (self.folder, cert, key):
                os.chown(path, self._account.pw_uid, self._account.pw_gid)
        self._run("initdb", "-D", str(self.pgdata), "-U", "postgres", "-A", "trust", "--no-sync")
        (self.pgdata / "pg_hba.conf").write_text(HBA)
        settings = {
            "listen_addresses": "127.0.0.1",
            "port": str(self.port),
            "unix_socket_directories": str(self.folder),
            "ssl": "on",
            "ssl_cert_file": str(cert),
            "ssl_key_file": str(key),
            "fsync": "off",
        }
        options = " ".join(f"-c {name}={value}" for name, value in settings.items())
        log = self.folder / "server.log"
        if self._account is not None:
            log.touch()
            os.chown(log, self._account.pw_uid, self._account.pw_gid)
        self._run("pg_ctl", "-D", str(self.pgdata), "-w", "-t", "60", "-l", str(log), "-o", options, "start")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.pgdata), "-w", "-m", "fast", "stop")

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}?sslmode=require"

    async def create_database(self, name: str) -> None:
        conn = await asyncpg.connect(self.dsn())
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
