"""The harness side of the adapter protocol (see bench/adapters/benchproto.py)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from typing import Any

from bench.peers import REPO_DIR


class AdapterError(RuntimeError):
    pass


#: where the akadze adapter imports akadze from; set once per run by snapshot_akadze
AKADZE_PATH: list[Path] = []
#: where the akadze_base peer imports akadze from: the frozen copy of --base-ref
BASE_PATH: list[Path] = []


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=REPO_DIR, capture_output=True, text=True, timeout=60
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def snapshot_akadze(dest: Path, ref: str | None = None, *, base: bool = False) -> dict[str, str]:
    """Copy akadze/ so that every step of a run measures the same code even while the checkout
    changes under it: the working tree as it is now, or with ``ref`` that commit's tree.
    Returns the commit and whether the copied code differs from it."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    if ref:
        archive = subprocess.run(
            ["git", "archive", "--format=tar", ref, "akadze"],
            cwd=REPO_DIR,
            capture_output=True,
            timeout=60,
            check=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(dest, filter="data")
        dirty = "no"
    else:
        shutil.copytree(REPO_DIR / "akadze", dest / "akadze", ignore=shutil.ignore_patterns("__pycache__"))
        dirty = "yes" if _git("status", "--porcelain", "--", "akadze") else "no"
    (BASE_PATH if base else AKADZE_PATH)[:] = [dest]
    return {"commit": _git("rev-parse", "--short", ref or "HEAD"), "dirty": dirty}


class AdapterProc:
    def __init__(self, proc: asyncio.subprocess.Process, name: str, log: Path) -> None:
        self.proc = proc
        self.name = name
        self.log = log

    @classmethod
    async def start(
        cls,
        python: str,
        script: Path,
        request: dict[str, Any],
        log: Path,
        with_repo: bool,
        base: bool = False,
    ) -> AdapterProc:
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        if with_repo:  # akadze: the run's frozen copy (see snapshot_akadze), else the checkout
            frozen = BASE_PATH if base else AKADZE_PATH
            env["PYTHONPATH"] = str(frozen[0] if frozen else REPO_DIR)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as err:
            err.write(f"\n=== {request['cmd']} {json.dumps(request)}\n".encode())
            err.flush()
            proc = await asyncio.create_subprocess_exec(
                python,
                str(script),
                json.dumps(request),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
                cwd=str(REPO_DIR),
                env=env,
                limit=16 * 1024 * 1024,
            )
        return cls(proc, f"{script.stem} {request['cmd']}", log)

    async def event(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        try:
            line = await asyncio.wait_for(self.proc.stdout.readline(), timeout)
        except TimeoutError:
            raise AdapterError(f"{self.name}: no answer within {timeout:.0f} s") from None
        if not line:
            code = await self.proc.wait()
            raise AdapterError(f"{self.name}: exited ({code}) without a result; see {self.log}")
        msg = json.loads(line)
        if msg.get("event") == "error":
            raise AdapterError(f"{self.name}: {msg['error']}")
        return msg

    async def until(self, event: str, timeout: float) -> dict[str, Any]:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            left = deadline - asyncio.get_running_loop().time()
            msg = await self.event(max(left, 0.01))
            if msg.get("event") == event:
                return msg

    async def send(self, word: str) -> None:
        assert self.proc.stdin is not None
        with contextlib.suppress(ConnectionError):
            self.proc.stdin.write((word + "\n").encode())
            await self.proc.stdin.drain()

    async def finish(self, timeout: float = 30.0) -> None:
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            self.kill()
            await self.proc.wait()

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()


async def call(
    python: str,
    script: Path,
    request: dict[str, Any],
    log: Path,
    with_repo: bool,
    timeout: float,
    base: bool = False,
) -> dict[str, Any]:
    """Run one adapter command to its result."""
    p = await AdapterProc.start(python, script, request, log, with_repo, base)
    try:
        result = await p.until("result", timeout)
        await p.finish()
        return result
    finally:
        p.kill()
