"""The adapter side of the bench protocol (shared by every adapter script).

An adapter is a script run by the harness with a peer's own interpreter:

    <venv>/bin/python bench/adapters/adapter_<peer>.py '<json request>'

The request is one JSON object with at least ``cmd`` and ``dsn``. The adapter answers with JSON
lines on its stdout, one event per line:

    {"event": "ready"}                       worker: about to start serving
    {"event": "first_job"}                   worker: the first job body started (latency warm-up)
    {"event": "warm_sent"}                   producer: warm-up job enqueued, waiting for "go"
    {"event": "result", ...}                 the command's figures; the last line
    {"event": "error", "error": "..."}       the command failed; the last line

It reads control lines on stdin: ``go`` (producer: start the timed schedule) and ``stop``
(worker: stop gracefully now). Anything a library prints goes to stderr, which the harness
keeps in a log file, because the adapter moves fd 1 to fd 2 before importing the library.

This module only uses the standard library, so it runs in every peer's venv.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import resource
import sys
import threading
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

_out: Any = None


def _open_protocol_stream() -> None:
    """Keep the real stdout for the protocol; send fd 1 (library prints) to stderr."""
    global _out
    if _out is None:
        _out = os.fdopen(os.dup(1), "w", buffering=1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr


def emit(event: str, **data: Any) -> None:
    _out.write(json.dumps({"event": event, **data}) + "\n")
    _out.flush()


class Control:
    """Lines from stdin, delivered to the event loop."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.go = asyncio.Event()
        self.stop = asyncio.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in sys.stdin:
            word = line.strip()
            if word == "go":
                self.loop.call_soon_threadsafe(self.go.set)
            elif word == "stop":
                self.loop.call_soon_threadsafe(self.stop.set)
        self.loop.call_soon_threadsafe(self.stop.set)  # harness went away


def _cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _host_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of the whole host, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return (0, 0)
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    total = sum(fields[:8])
    return (total - idle, total)


class Recorder:
    """Called at the top of every job body. Keeps the hot path to one append.

    ``expect``: the number of job starts after which ``done`` is set (the drain's stop
    condition for peers without a drain mode, and the latency step's end).
    """

    def __init__(self, expect: int) -> None:
        self.expect = expect
        self.starts: list[float] = []
        self.latencies: list[float] = []
        self.done = asyncio.Event()
        self.first_cpu = self.last_cpu = 0.0
        self.first_host = self.last_host = (0, 0)
        self.finished_at: float | None = None

    def job(self, args: dict[str, Any]) -> None:
        now = time.perf_counter()
        starts = self.starts
        starts.append(now)
        t = args.get("t")
        if t is not None:
            self.latencies.append(time.time() - t)
        n = len(starts)
        if n == 1:
            self.first_cpu = _cpu_seconds()
            self.first_host = _host_cpu()
            emit("first_job")
        if n == self.expect:
            self.last_cpu = _cpu_seconds()
            self.last_host = _host_cpu()
            self.done.set()

    def summary(self, run_returned_at: float) -> dict[str, Any]:
        starts = sorted(self.starts)
        n = len(starts)
        out: dict[str, Any] = {
            "started": n,
            "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        }
        if n >= 2:
            span = starts[-1] - starts[0]
            out["span_s"] = span
            out["rate"] = n / span if span > 0 else None
            # Rate per tenth of the jobs: edges at starts[k*(n-1)/10].
            edges = [starts[round(k * (n - 1) / 10)] for k in range(11)]
            per = (n - 1) / 10
            out["tenths"] = [(per / (b - a)) if b > a else None for a, b in itertools.pairwise(edges)]
            out["stop_s"] = run_returned_at - starts[-1]
        if self.last_cpu:
            out["worker_cpu_s"] = self.last_cpu - self.first_cpu
            busy = self.last_host[0] - self.first_host[0]
            total = self.last_host[1] - self.first_host[1]
            out["host_busy"] = busy / total if total else None
        if self.latencies:
            out["latencies_ms"] = [x * 1000 for x in self.latencies]
        return out


async def timed_single(enqueue_one: Callable[[int], Awaitable[Any]], jobs: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    for i in range(jobs):
        await enqueue_one(i)
    elapsed = time.perf_counter() - t0
    return {"jobs": jobs, "elapsed_s": elapsed, "rate": jobs / elapsed}


async def timed_batches(
    enqueue_batch: Callable[[list[int]], Awaitable[Any]], jobs: int, batch: int
) -> dict[str, Any]:
    t0 = time.perf_counter()
    for start in range(0, jobs, batch):
        await enqueue_batch(list(range(start, min(start + batch, jobs))))
    elapsed = time.perf_counter() - t0
    return {"jobs": jobs, "elapsed_s": elapsed, "rate": jobs / elapsed}


async def paced_producer(
    enqueue: Callable[[dict[str, Any]], Awaitable[Any]], jobs: int, rate: float
) -> dict[str, Any]:
    """Warm-up job, wait for "go", then ``jobs`` enqueues on a fixed schedule.

    Each job carries ``t`` = time.time() taken just before its enqueue call.
    """
    control = Control()
    await enqueue({"i": -1})
    emit("warm_sent")
    await control.go.wait()
    t0 = time.perf_counter()
    behind = 0
    for i in range(jobs):
        due = t0 + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            behind += 1
        await enqueue({"i": i, "t": time.time()})
    elapsed = time.perf_counter() - t0
    return {"jobs": jobs, "elapsed_s": elapsed, "late_sends": behind}


def run(handlers: dict[str, Handler], info: Callable[[], dict[str, Any]]) -> None:
    """Entry point of an adapter script."""
    _open_protocol_stream()
    try:
        request = json.loads(sys.argv[1])
        cmd = request["cmd"]
        if cmd == "info":
            result = {
                **info(),
                "python": ".".join(map(str, sys.version_info[:3])),
            }
        else:
            result = asyncio.run(handlers[cmd](request))
        emit("result", **result)
    except BaseException as exc:  # report anything, including KeyboardInterrupt
        emit("error", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc())
        sys.exit(1)
