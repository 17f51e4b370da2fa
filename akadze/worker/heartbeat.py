"""Proves the worker alive from outside its event loop, so a task that blocks does not make
its worker look dead. Finding its row gone (declared lost), it registers the worker again.

On Linux the beats come from a small process of their own (akadze/worker/beat.py): a task that
holds the GIL in one long C call stops every thread of the worker, a heartbeat thread included,
but not another process. That process beats while the worker exists and is not stopped
(SIGSTOP), and ends with it. Where it cannot run (no /proc, or it fails to start), the beats
come from a thread, as before: there a task holding the GIL past ``lost_after`` gets its worker
declared lost (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from sqlalchemy.engine import URL
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

from akadze.db.queries import Queries, beat_statements
from akadze.db.raw import raw_connection
from akadze.db.url import asyncpg_dsns, with_libpq_params

logger = logging.getLogger("akadze.worker")

_BEAT = Path(__file__).with_name("beat.py")


class Heartbeat:
    """The worker's heartbeat, beating off the event loop (the module docstring says from where).
    ``healthy`` turns False when beats have failed for most of ``lost_after``: the worker then
    stops claiming, since it may be declared lost and its jobs rescued."""

    def __init__(
        self, url: URL, registration: Mapping[str, Any], *, interval_s: float, process: bool = True
    ) -> None:
        """``registration`` holds Queries.register_worker's arguments: they re-register a
        worker that was declared lost. ``process=False`` beats from a thread only."""
        self.url = url
        self.use_process = process
        self.worker_id: str = registration["worker_id"]
        self.interval_s = interval_s
        self.lost_after_s: float = registration["lost_after_s"]
        self._register = dict(registration)
        #: monotonic time of the last heartbeat the database acknowledged
        self.last_ok = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="akadze-heartbeat", daemon=True)
        #: the heartbeat process, while the beats come from one
        self.process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None

    @property
    def healthy(self) -> bool:
        """False once heartbeats have failed for most of the lost horizon: stop claiming."""
        return time.monotonic() - self.last_ok < self.lost_after_s * 0.8

    def start(self) -> None:
        """Beat from a process of its own where possible, else from a thread."""
        if not (self.use_process and process_possible() and self._start_process()):
            self._thread.start()

    def stop(self) -> None:
        """Stop beating and wait (up to 10 s each) for the process or thread to end; a process that does
        not end is killed. Blocking: the worker calls it from a thread, before it unregisters."""
        self._stop.set()
        process = self.process
        if process is not None:
            _close(process.stdin)  # the process ends when its stdin closes
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._reader is not None:
            self._reader.join(timeout=10)
        if process is not None:
            _close(process.stdout)
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    # -- the heartbeat process ---------------------------------------------------------------

    def _start_process(self) -> bool:
        heartbeat, register = beat_statements(self.worker_id, self._register)
        config = {
            "dsns": asyncpg_dsns(self.url),
            "interval_s": self.interval_s,
            "heartbeat": heartbeat,
            "register": register,
        }
        try:
            # -P: the script's folder (akadze/worker) must not shadow the standard library
            process = subprocess.Popen(  # noqa: S603 (this interpreter, akadze's own script)
                [sys.executable, "-P", str(_BEAT)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                close_fds=True,
            )
            assert process.stdin is not None
            # the DSN holds the password: on stdin, never on the command line
            process.stdin.write(json.dumps(config) + "\n")
            process.stdin.flush()
        except OSError as exc:
            logger.warning("heartbeat process did not start (%s); beating from a thread", type(exc).__name__)
            return False
        self.process = process
        self._reader = threading.Thread(target=self._read, name="akadze-heartbeat-reader", daemon=True)
        self._reader.start()
        return True

    def _read(self) -> None:
        """The process's reports: one line per beat."""
        process = self.process
        assert process is not None and process.stdout is not None
        failing = False
        for line in process.stdout:
            report = line.strip()
            if report in ("ok", "lost"):
                self.last_ok = time.monotonic()
                if failing:
                    logger.info("heartbeat recovered")
                failing = False
                if report == "lost":
                    _warn_lost(self.worker_id)
            elif report.startswith("fail"):
                if not failing:
                    logger.warning("heartbeat failed (%s); retrying", report.removeprefix("fail ").strip())
                failing = True
        if not self._stop.is_set():
            code = process.wait()
            _close(process.stdin)
            _close(process.stdout)
            logger.warning("heartbeat process ended (exit %s); beating from a thread", code)
            self.process = None
            self._thread.start()

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        engine = with_libpq_params(
            create_async_engine(
                self.url,
                poolclass=NullPool,
                connect_args={"statement_cache_size": 0, "prepared_statement_cache_size": 0},
            )
        )
        failing = False
        try:
            while not self._stop.wait(self.interval_s):
                try:
                    loop.run_until_complete(asyncio.wait_for(self._beat(engine), self.interval_s * 2))
                except Exception as exc:
                    if not failing:
                        logger.warning("heartbeat failed (%s); retrying", type(exc).__name__)
                    failing = True
                else:
                    if failing:
                        logger.info("heartbeat recovered")
                    failing = False
        finally:
            loop.run_until_complete(engine.dispose())
            loop.close()

    async def _beat(self, engine: Any) -> None:
        async with raw_connection(engine) as raw:
            alive = await Queries.heartbeat(raw, self.worker_id)
            if not alive:
                await Queries.register_worker(raw, **self._register)
                _warn_lost(self.worker_id)
        self.last_ok = time.monotonic()


def process_possible() -> bool:
    """Whether the heartbeat process can tell a stopped worker from a running one (/proc)."""
    return os.path.exists(f"/proc/{os.getpid()}/stat")


def _warn_lost(worker_id: str) -> None:
    logger.warning(
        "worker %s was declared lost (its heartbeat was late); its running jobs were "
        "rescued and their runs here will be dropped; registered again",
        worker_id,
    )


def _close(stream: IO[str] | None) -> None:
    if stream is not None:
        try:
            stream.close()
        except OSError:
            pass
