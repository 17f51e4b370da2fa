"""Worker processes for the scenarios: start, signal, restart, and their logs.

Each worker is ``akadze worker tests.faults.app:create_app`` (or the spec's app) in its own
process and process group, so SIGKILL, SIGSTOP and SIGTERM are real. Every signal the harness
sends is written to ``chk_fault`` with the target pid, which the checker uses to justify re-runs
and time rescues.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .ledger import record_fault

#: the checkout's root: worker processes import akadze and tests.faults from here
ROOT = Path(__file__).resolve().parents[2]

_CLI = "import sys; from akadze.cli import main; sys.argv[0] = 'akadze'; main()"


@dataclass
class WorkerSpec:
    """How to run one worker: the app's database URL and the CLI options."""

    database_url: str
    ledger_dsn: str
    slots: int = 4
    lost_after: float = 3.0
    poll_interval: float = 0.5
    shutdown_timeout: float = 5.0
    log_level: str = "INFO"
    pool_size: int | None = None
    queues: Sequence[str] = ("faults",)
    #: the app the worker loads (``akadze worker APP``)
    app: str = "tests.faults.app:create_app"
    extra_env: dict[str, str] = field(default_factory=dict)
    #: a command the worker's command line is appended to (it must exec it, keeping the pid):
    #: ``ip netns exec`` for a worker "host" in a network namespace (netns.py)
    prefix: Sequence[str] = ()


class WorkerProcess:
    def __init__(self, name: str, spec: WorkerSpec, log_dir: Path) -> None:
        self.name = name
        self.spec = spec
        self.log_dir = log_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.incarnation = 0
        #: pids of every incarnation, oldest first
        self.pids: list[int] = []
        #: exit codes of incarnations that ended
        self.exits: list[int] = []

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def log_path(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    def argv(self) -> list[str]:
        spec = self.spec
        argv = [*spec.prefix, sys.executable, "-c", _CLI, "worker", spec.app]
        for queue in spec.queues:
            argv += ["-q", queue]
        argv += [
            "--slots",
            str(spec.slots),
            "--lost-after",
            str(spec.lost_after),
            "--poll-interval",
            str(spec.poll_interval),
            "--shutdown-timeout",
            str(spec.shutdown_timeout),
            "--log-level",
            spec.log_level,
        ]
        return argv

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        env["PYTHONUNBUFFERED"] = "1"
        # a worker that does not stop is sent SIGABRT before SIGKILL (stop()): its threads'
        # stacks then land in its log
        env["PYTHONFAULTHANDLER"] = "1"
        env["AKADZE_FAULTS_URL"] = self.spec.database_url
        env["AKADZE_FAULTS_LEDGER"] = self.spec.ledger_dsn
        env["AKADZE_FAULTS_WORKER"] = f"{self.name}#{self.incarnation}"
        if self.spec.pool_size is not None:
            env["AKADZE_FAULTS_POOL"] = str(self.spec.pool_size)
        env.update(self.spec.extra_env)
        return env

    def start(self) -> None:
        assert not self.alive, f"{self.name} already runs"
        self.incarnation += 1
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"--- {self.name} incarnation {self.incarnation} ---\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.argv(),
                env=self.env(),
                cwd=ROOT,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.pids.append(self.proc.pid)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def reap(self) -> int | None:
        """The exit code if the current incarnation ended (recorded once)."""
        if self.proc is None:
            return None
        code = self.proc.poll()
        if code is not None and len(self.exits) < len(self.pids):
            self.exits.append(code)
        return code

    def send(self, sig: int) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    async def stop(self, timeout: float = 30.0) -> int | None:
        """Graceful stop (SIGTERM); SIGKILL after ``timeout``. Returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.send(signal.SIGCONT)
            self.send(signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while self.proc.poll() is None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            if self.proc.poll() is None:
                # where it hangs: faulthandler (PYTHONFAULTHANDLER) writes every thread's stack
                # to the worker's log on SIGABRT
                self.send(signal.SIGABRT)
                deadline = time.monotonic() + 2.0
                while self.proc.poll() is None and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                if self.proc.poll() is None:
                    self.send(signal.SIGKILL)
                while self.proc.poll() is None:
                    await asyncio.sleep(0.05)
                self.reap()
                return None
        return self.reap()

    @property
    def serving(self) -> bool:
        """The current incarnation has started serving (its signal handlers are in place)."""
        text = self.log_text()
        marker = f"--- {self.name} incarnation {self.incarnation} ---"
        return self.alive and "serving queues" in text[text.rfind(marker) :]

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


class Supervisor:
    """A fleet of worker processes; optionally restarts the ones that die."""

    def __init__(
        self,
        spec: WorkerSpec | Sequence[WorkerSpec],
        count: int,
        log_dir: Path,
        *,
        fault_dsn: str,
    ) -> None:
        """``spec``: one for every worker, or one per worker (``count`` of them)."""
        self.fault_dsn = fault_dsn
        specs = [spec] * count if isinstance(spec, WorkerSpec) else list(spec)
        assert len(specs) == count, (len(specs), count)
        self.workers = [WorkerProcess(f"w{i}", specs[i - 1], log_dir) for i in range(1, count + 1)]
        self.restart_delay = (0.5, 2.0)
        self.restarts = 0
        self.kills = 0
        self._watch: asyncio.Task[None] | None = None
        self._rng = random.Random()
        self.log_dir = log_dir

    def note(self, event: str) -> None:
        """The supervisor's own log: what it did, when."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with (self.log_dir / "supervisor.log").open("a") as log:
            log.write(f"{time.strftime('%H:%M:%S')}.{int(time.time() * 1000) % 1000:03d} {event}\n")

    def start(self) -> None:
        for worker in self.workers:
            worker.start()

    def seed(self, seed: int) -> None:
        self._rng.seed(seed)

    def watch(self) -> None:
        """Restart dead workers after a random delay, until ``unwatch()``."""
        if self._watch is None:
            self._watch = asyncio.get_running_loop().create_task(self._restarter())

    async def unwatch(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            try:
                await self._watch
            except asyncio.CancelledError:
                pass
            self._watch = None

    async def _restarter(self) -> None:
        due: dict[str, float] = {}
        while True:
            now = time.monotonic()
            for worker in self.workers:
                if worker.alive:
                    continue
                worker.reap()
                if worker.name not in due:
                    due[worker.name] = now + self._rng.uniform(*self.restart_delay)
                elif now >= due[worker.name]:
                    del due[worker.name]
                    worker.start()
                    self.restarts += 1
                    self.note(f"restarted {worker.name} as pid {worker.pid} (exit {worker.exits[-1:]})")
            await asyncio.sleep(0.05)

    async def kill(self, worker: WorkerProcess, sig: int = signal.SIGKILL) -> None:
        pid = worker.pid
        if pid is None or not worker.alive:
            return
        kinds = {int(signal.SIGKILL): "kill", int(signal.SIGSTOP): "stop", int(signal.SIGCONT): "cont"}
        kind = kinds.get(int(sig), "signal")
        worker.send(sig)
        self.note(f"{kind} {worker.name} pid {pid}")
        if sig == signal.SIGKILL:
            self.kills += 1
            # wait until it is gone: a settle() right after must not take it for a serving worker
            deadline = time.monotonic() + 5.0
            while worker.alive and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
        await record_fault(self.fault_dsn, kind, str(pid), worker.name)

    def choice(self) -> WorkerProcess:
        alive = [w for w in self.workers if w.alive] or self.workers
        return self._rng.choice(alive)

    def ensure_running(self) -> None:
        for worker in self.workers:
            if not worker.alive:
                worker.reap()
                worker.start()
                self.restarts += 1
                self.note(f"started {worker.name} again as pid {worker.pid} (exit {worker.exits[-1:]})")

    async def settle(self, timeout: float = 60.0) -> None:
        """Stop restarting; start the dead ones and wait until every worker serves."""
        await self.unwatch()
        deadline = time.monotonic() + timeout
        while not all(w.serving for w in self.workers) and time.monotonic() < deadline:
            # again each time: a worker SIGKILLed a moment ago may not have died yet
            self.ensure_running()
            await asyncio.sleep(0.1)

    async def stop(self, timeout: float = 30.0) -> list[int | None]:
        await self.unwatch()
        self.note(
            "stopping: " + ", ".join(f"{w.name}={'alive' if w.alive else w.reap()}" for w in self.workers)
        )
        return list(await asyncio.gather(*(w.stop(timeout) for w in self.workers)))

    def logs(self) -> str:
        return "\n".join(w.log_text() for w in self.workers)
