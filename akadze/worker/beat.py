"""The heartbeat process: proves a worker alive while the worker's own interpreter cannot.

A task that holds the GIL in one long C call (``sum(range(10**9))``) stops every thread of
its process, a heartbeat thread included. This small process beats from outside: while its
parent (the worker) exists and is not stopped (SIGSTOP), it runs the heartbeat statement
every interval, registers the worker again when its row is gone, and writes one line per beat
to its stdout for the worker to read (``ok``, ``lost``, ``fail <error type>``).

It is run by path (``python -P .../beat.py``), never imported: importing akadze would cost
the memory of the whole package; this needs asyncpg and the standard library. Its settings
(DSN, statements, interval) come as one JSON line on stdin, never on the command line. It
ends when stdin closes (the worker stops or dies) or when its parent is gone.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import sys
import time
from typing import Any


def parent_state(pid: int) -> str | None:
    """The state letter of process ``pid`` (``R``, ``S``, ``T`` for stopped...), or None when
    it is gone. Linux only: the worker uses a heartbeat thread where /proc is missing."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold anything, spaces included
    end = data.rindex(b")")
    return data[end + 2 : end + 3].decode()


class Beat:
    """The heartbeat process's state: where to connect (``dsns``, tried in turn), how often, and the
    heartbeat and register statements with their arguments, as the worker sent them on stdin."""

    def __init__(self, config: dict[str, Any]) -> None:
        #: one DSN, or one per host of a URL with several, tried in turn, each with the query
        #: that says whether its server will do (akadze.db.hosts), or None
        self.dsns: list[tuple[str, str | None]] = [(dsn, check) for dsn, check in config["dsns"]]
        self.interval_s: float = config["interval_s"]
        self.heartbeat: tuple[str, list[Any]] = (config["heartbeat"][0], config["heartbeat"][1])
        self.register: tuple[str, list[Any]] = (config["register"][0], config["register"][1])
        self.conn: Any = None

    async def once(self) -> str:
        """One beat: ``ok`` when the worker's row was there, ``lost`` when it was gone and has been
        registered again. Connects first when needed; a connection or statement error propagates."""
        if self.conn is None or self.conn.is_closed():
            self.conn = await self.connect()
        if await self.conn.fetchval(self.heartbeat[0], *self.heartbeat[1]) is not None:
            return "ok"
        await self.conn.execute(self.register[0], *self.register[1])
        return "lost"

    async def connect(self) -> Any:
        """The first DSN that connects, each within two intervals (a host that does not answer
        must not keep the beats from the next one); the last error if none does."""
        import asyncpg

        async def one(dsn: str, check: str | None) -> Any:
            # no statement cache: a pooler in transaction mode may stand in front
            conn = await asyncpg.connect(dsn, statement_cache_size=0)
            try:
                if check is not None and not await conn.fetchval(check):
                    raise LookupError("not the server target_session_attrs asks for")
            except BaseException:
                conn.terminate()
                raise
            return conn

        last: BaseException | None = None
        for dsn, check in self.dsns:
            try:
                return await asyncio.wait_for(one(dsn, check), self.interval_s * 2)
            except Exception as exc:
                last = exc
        assert last is not None
        raise last

    async def close(self) -> None:
        """Close the connection, if any; terminate it when the server does not answer within 2 s."""
        if self.conn is not None:
            try:
                await asyncio.wait_for(self.conn.close(), 2)
            except Exception:
                self.conn.terminate()


def _say(line: str) -> bool:
    try:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()
    except OSError:  # the worker is gone
        return False
    return True


def main() -> None:
    """The process's entry point: read the settings line, then beat every interval and report each
    beat on stdout, until stdin closes or the parent is gone. Skips beats while the parent is
    stopped, so a stopped worker is declared lost; ignores SIGINT and SIGTERM."""
    # a Ctrl-C or a SIGTERM to the worker's process group must not end the beats while the
    # worker drains its runs; this process ends with its worker (stdin closes)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    parent = os.getppid()
    config = json.loads(sys.stdin.readline())
    beat = Beat(config)
    loop = asyncio.new_event_loop()
    due = time.monotonic()
    try:
        while True:
            readable, _, _ = select.select([sys.stdin], [], [], max(0.0, due - time.monotonic()))
            if readable and not sys.stdin.readline():
                return  # stdin closed: the worker stops, or died
            if time.monotonic() < due:
                continue
            due = max(due + beat.interval_s, time.monotonic())
            state = parent_state(parent)
            if state is None or state in "ZX" or os.getppid() != parent:
                return
            if state in "Tt":
                continue  # stopped (SIGSTOP, a debugger): it must look as dead as it is
            try:
                # two intervals for the beat, and two more for each host tried before it
                bound = beat.interval_s * 2 * (len(beat.dsns) + 1)
                line = loop.run_until_complete(asyncio.wait_for(beat.once(), bound))
            except Exception as exc:
                loop.run_until_complete(beat.close())
                beat.conn = None
                line = f"fail {type(exc).__name__}"
            if not _say(line):
                return
    finally:
        loop.run_until_complete(beat.close())
        loop.close()


if __name__ == "__main__":
    main()
