"""The akadze side of ``python -m bench.workflows``: run as a script with a snapshot of akadze on
PYTHONPATH (bench/proc.py's snapshot_akadze), importing nothing from ``bench``.

    python bench/workflows_child.py '<JSON request>'

Commands: ``setup`` (migrate, hand back the claim statement), ``enqueue`` (plain jobs, a
fan-out with a fan-in, or waiting steps), ``worker`` (serve until it has started ``expect``
jobs), ``produce`` (small fan-in workflows and plain jobs at a fixed rate) and ``count`` (the
messages an enqueue sends, through a counting proxy). Each answers with JSON lines on stdout,
the last one ``{"event": "result", ...}`` or ``{"event": "error", ...}``.
"""

from __future__ import annotations

import asyncio
import json
import struct
import sys
import time
from collections import Counter
from typing import Any
from urllib.parse import urlsplit, urlunsplit

TASK = "bench.noop"
FAN_IN = "bench.fanin"
#: the task of the roots that keep the waiting steps waiting: its queue is never served
HELD = "bench.held"
QUEUE = "default"
HELD_QUEUE = "held"
#: the protocol codes of SSLRequest and GSSENCRequest (answered "N" by the proxy)
_ENCRYPTION_REQUESTS = (80877103, 80877104)


def emit(event: str, **data: Any) -> None:
    print(json.dumps({"event": event, **data}), flush=True)


def make_app(dsn: str, starts: list[float] | None = None, fan_in_starts: list[float] | None = None) -> Any:
    from akadze import Akadze

    app = Akadze(database_url=dsn)

    @app.task(TASK, queue=QUEUE)
    async def noop(i: int) -> None:
        if starts is not None:
            starts.append(time.perf_counter())

    @app.task(FAN_IN, queue=QUEUE)
    async def fanin(n: int) -> None:
        now = time.perf_counter()
        if starts is not None:
            starts.append(now)
        if fan_in_starts is not None:
            fan_in_starts.append(now)

    @app.task(HELD, queue=HELD_QUEUE)
    async def held(i: int) -> None: ...

    return app


def fan_out(app: Any, name: str, width: int, *, join: bool = True) -> Any:
    """``width`` no-op steps and one fan-in step after all of them (none without ``join``)."""
    from akadze import Workflow

    wf = Workflow(name=name)
    noop, fanin = app.get_task(TASK), app.get_task(FAN_IN)
    names = [f"s{i}" for i in range(width)]
    for i, step in enumerate(names):
        wf.add(step, noop.bind(i=i))
    if join:
        wf.add("join", fanin.bind(n=width), after=names)
    return wf


def waiting(app: Any, name: str, width: int) -> Any:
    """A root in a queue nobody serves and ``width`` no-op steps waiting for it."""
    from akadze import Workflow

    wf = Workflow(name=name)
    wf.add("root", app.get_task(HELD).bind(i=0))
    noop = app.get_task(TASK)
    for i in range(width):
        wf.add(f"w{i}", noop.bind(i=i), after=["root"])
    return wf


def max_steps() -> int:
    """The most steps a workflow may have (akadze.workflow's documented limit), at most 10,000."""
    try:
        from akadze import workflow
    except ImportError:
        return 10_000
    for name in ("MAX_STEPS", "MAX_WORKFLOW_STEPS", "STEP_LIMIT"):
        if isinstance(getattr(workflow, name, None), int):
            return min(int(getattr(workflow, name)), 10_000)
    return 10_000


async def setup(req: dict[str, Any]) -> dict[str, Any]:
    import akadze
    from akadze.db.sql import statement

    app = make_app(req["dsn"])
    try:
        await app.migrate()
    finally:
        await app.dispose()
    claim = statement("claim_completing")
    return {
        "version": akadze.__version__,
        "max_steps": max_steps(),
        "claim": {"sql": claim.pg, "params": list(claim.params)},
    }


async def enqueue(req: dict[str, Any]) -> dict[str, Any]:
    """kind plain: ``jobs`` no-op jobs by enqueue_many (5,000 a call); fanout: one workflow of
    ``jobs`` steps and a fan-in; steps: the same without the fan-in (no edges); waiting: ``jobs``
    waiting steps in workflows of at most the limit."""
    app = make_app(req["dsn"])
    kind, jobs = req["kind"], req["jobs"]
    began = time.perf_counter()
    workflows = 0
    try:
        if kind == "plain":
            noop = app.get_task(TASK)
            for first in range(0, jobs, 5000):
                await noop.enqueue_many([{"i": i} for i in range(first, min(first + 5000, jobs))])
        elif kind in ("fanout", "steps"):
            await fan_out(app, kind, jobs, join=kind == "fanout").enqueue()
            workflows = 1
        else:
            per = max_steps() - 1
            left = jobs
            while left > 0:
                await waiting(app, f"waiting{workflows}", min(per, left)).enqueue()
                left -= per
                workflows += 1
    finally:
        await app.dispose()
    return {"seconds": time.perf_counter() - began, "workflows": workflows}


async def worker(req: dict[str, Any]) -> dict[str, Any]:
    """Serve the default queue until ``expect`` jobs started; their start times (perf_counter)."""
    from datetime import timedelta

    from akadze.worker import Worker

    starts: list[float] = []
    fan_in_starts: list[float] = []
    app = make_app(req["dsn"], starts, fan_in_starts)
    run = Worker(
        app, queues=[QUEUE], slots=req["slots"], poll_interval=timedelta(seconds=req.get("poll", 1.0))
    )
    expect = req["expect"]

    async def watch() -> None:
        while len(starts) < expect:
            await asyncio.sleep(0.01)
        run.stop()

    watcher = asyncio.create_task(watch())
    try:
        await run.run()
    finally:
        watcher.cancel()
        await app.dispose()
    span = starts[-1] - starts[0] if len(starts) > 1 else 0.0
    fan_in_after = fan_in_starts[0] - starts[0] if fan_in_starts else None
    return {"started": len(starts), "span_s": span, "fan_in_after_s": fan_in_after}


async def produce(req: dict[str, Any]) -> dict[str, Any]:
    """``count`` fan-in workflows of ``parents`` parents and ``count`` plain jobs, one of each
    every 1/``rate`` s, alternating."""
    app = make_app(req["dsn"])
    noop = app.get_task(TASK)
    began = time.perf_counter()
    try:
        for n in range(req["count"]):
            due = began + n / req["rate"]
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
            await fan_out(app, f"latency{n}", req["parents"]).enqueue()
            await asyncio.sleep(max(0.0, due + 0.5 / req["rate"] - time.perf_counter()))
            await noop.enqueue(i=n)
    finally:
        await app.dispose()
    return {"seconds": time.perf_counter() - began}


class Counting:
    """A TCP proxy on loopback in front of PostgreSQL that counts the messages each client
    sends, by type (the frontend protocol: a type byte and a length). A round trip is a Sync
    ("S") or a simple Query ("Q"): the client then waits for ReadyForQuery. SSL and GSS
    encryption requests are answered "N" (not here), so everything stays readable."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.counts: Counter[str] = Counter()
        self.server: asyncio.base_events.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self.host, self.port)
        try:
            while True:  # the startup packet, after any encryption request
                length = struct.unpack("!i", await reader.readexactly(4))[0]
                body = await reader.readexactly(length - 4)
                if struct.unpack("!i", body[:4])[0] in _ENCRYPTION_REQUESTS:
                    writer.write(b"N")
                    await writer.drain()
                    continue
                up_writer.write(struct.pack("!i", length) + body)
                break
            down = asyncio.create_task(self._pipe(up_reader, writer))
            try:
                while True:
                    head = await reader.readexactly(5)
                    body = await reader.readexactly(struct.unpack("!i", head[1:])[0] - 4)
                    self.counts[chr(head[0])] += 1
                    up_writer.write(head + body)
                    await up_writer.drain()
            finally:
                down.cancel()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            up_writer.close()
            writer.close()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """The server's side, as it is; when the server closes, the client's connection closes."""
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    def take(self) -> dict[str, int]:
        found = dict(self.counts)
        self.counts.clear()
        return found


async def count(req: dict[str, Any]) -> dict[str, Any]:
    """For each size: the messages of a workflow's enqueue (``size`` steps: a fan-out and its
    fan-in) and of
    ``enqueue_many`` of ``size`` plain jobs, the first of each size (cold: statements prepared
    on the connection) and the next (warm), through the counting proxy."""
    parts = urlsplit(req["dsn"])
    proxy = Counting(parts.hostname or "127.0.0.1", parts.port or 5432)
    port = await proxy.start()
    netloc = f"{parts.username}@127.0.0.1:{port}" if parts.username else f"127.0.0.1:{port}"
    dsn = urlunsplit((parts.scheme, netloc, parts.path, "sslmode=disable", ""))
    app = make_app(dsn)
    out: list[dict[str, Any]] = []
    try:
        await fan_out(app, "warmup", 2).enqueue()  # connections made, the engine's first queries
        for size in req["sizes"]:
            for kind in ("workflow", "enqueue_many"):
                for phase in ("cold", "warm"):
                    proxy.take()
                    began = time.perf_counter()
                    if kind == "workflow":
                        await fan_out(app, f"count{size}{phase}", size - 1).enqueue()
                    else:
                        await app.get_task(TASK).enqueue_many([{"i": i} for i in range(size)])
                    seconds = time.perf_counter() - began
                    msgs = proxy.take()
                    out.append(
                        {
                            "kind": kind,
                            "size": size,
                            "phase": phase,
                            "seconds": seconds,
                            "round_trips": msgs.get("S", 0) + msgs.get("Q", 0),
                            "statements": msgs.get("E", 0) + msgs.get("Q", 0),
                            "messages": msgs,
                        }
                    )
    finally:
        await app.dispose()
    return {"counts": out}


COMMANDS = {"setup": setup, "enqueue": enqueue, "worker": worker, "produce": produce, "count": count}


def main(raw: str) -> None:
    req = json.loads(raw)
    try:
        result = asyncio.run(COMMANDS[req["cmd"]](req))
    except BaseException as exc:
        emit("error", error=f"{type(exc).__name__}: {exc}")
        raise
    emit("result", **result)


if __name__ == "__main__":
    main(sys.argv[1])
