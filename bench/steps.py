"""The measured steps. Each starts on a fresh database ``bench_<peer>`` with the peer's schema
installed by the peer's own installer, and returns one flat record of figures."""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.peers import Peer
from bench.pg import Admin, dsn_for
from bench.proc import AdapterError, AdapterProc, call


@dataclass
class Config:
    dsn: str
    jobs: int
    batch: int
    latency_jobs: int
    latency_rate: float
    log_dir: Path


@dataclass
class Runner:
    admin: Admin
    cfg: Config
    pythons: dict[str, str]  # peer name -> interpreter

    def db(self, peer: Peer) -> str:
        return f"bench_{peer.name}"

    def _req(self, peer: Peer, cmd: str, **extra: Any) -> dict[str, Any]:
        return {"cmd": cmd, "dsn": dsn_for(self.cfg.dsn, self.db(peer)), **peer.options, **extra}

    def _log(self, peer: Peer, step: str, rep: int) -> Path:
        return self.cfg.log_dir / f"{peer.name}.{step}.{rep}.log"

    async def _call(self, peer: Peer, log: Path, cmd: str, timeout: float, **extra: Any) -> dict[str, Any]:
        return await call(
            self.pythons[peer.name],
            peer.script,
            self._req(peer, cmd, **extra),
            log,
            with_repo=peer.venv is None,
            timeout=timeout,
            base=peer.base,
        )

    async def _start(self, peer: Peer, log: Path, cmd: str, **extra: Any) -> AdapterProc:
        return await AdapterProc.start(
            self.pythons[peer.name],
            peer.script,
            self._req(peer, cmd, **extra),
            log,
            with_repo=peer.venv is None,
            base=peer.base,
        )

    async def _fresh(self, peer: Peer, log: Path) -> None:
        await self.admin.recreate(self.db(peer))
        await self._call(peer, log, "install", 120)

    async def _unfinished(self, peer: Peer, log: Path) -> int:
        return int((await self._call(peer, log, "unfinished", 60))["unfinished"])

    # --- steps -------------------------------------------------------------------------------

    async def run(self, step: str, peer: Peer, rep: int) -> dict[str, Any]:
        log = self._log(peer, step, rep)
        record: dict[str, Any] = {"peer": peer.name, "step": step, "rep": rep}
        t0 = time.monotonic()
        record["load1"] = os.getloadavg()[0]
        try:
            if step in ("enqueue_single", "enqueue_batch"):
                record.update(await self._enqueue(peer, step, log))
            elif step.startswith("drain_c"):
                record.update(await self._drain(peer, int(step.removeprefix("drain_c")), log))
            elif step == "latency":
                record.update(await self._latency(peer, log))
            else:
                raise ValueError(f"unknown step {step}")
            record["ok"] = not record.get("problems")
        except Exception as exc:  # one failed step must not end the run
            record["ok"] = False
            what = str(exc) if isinstance(exc, AdapterError) else f"{type(exc).__name__}: {exc}"
            record["problems"] = [*record.get("problems", []), what]
        finally:
            record["wall_s"] = time.monotonic() - t0
            await self.admin.drop(self.db(peer))
        return record

    async def _enqueue(self, peer: Peer, step: str, log: Path) -> dict[str, Any]:
        jobs = self.cfg.jobs
        await self._fresh(peer, log)
        db = self.db(peer)
        await self.admin.wait_idle(db)
        before = await self.admin.snapshot(db)
        async with self.admin.noise(db) as noise:
            if step == "enqueue_single":
                res = await self._call(peer, log, step, 60 + jobs / 50, jobs=jobs)
            else:
                res = await self._call(peer, log, step, 60 + jobs / 200, jobs=jobs, batch=self.cfg.batch)
        delta = await self.admin.delta(db, before)
        out = {"rate": res["rate"], "elapsed_s": res["elapsed_s"], **_per_job(delta, jobs)}
        out["noise"] = dict(noise)
        queued = await self._unfinished(peer, log)
        if queued != jobs:
            out["problems"] = [f"{queued} jobs queued after enqueueing {jobs}"]
        return out

    async def _drain(self, peer: Peer, slots: int, log: Path) -> dict[str, Any]:
        jobs = self.cfg.jobs
        db = self.db(peer)
        await self._fresh(peer, log)
        await self._call(
            peer, log, "enqueue_batch", 60 + jobs / 200, jobs=jobs, batch=self.cfg.batch, preload=True
        )
        await self.admin.analyze(db)
        await self.admin.wait_idle(db)
        before = await self.admin.snapshot(db)
        async with self.admin.noise(db) as noise:
            res = await self._call(
                peer,
                log,
                "worker",
                120 + jobs / 40,
                slots=slots,
                expect=jobs,
                mode="drain",
                **peer.worker_options,
            )
        delta = await self.admin.delta(db, before)
        out: dict[str, Any] = {
            k: res.get(k) for k in ("rate", "span_s", "tenths", "stop_s", "host_busy", "started", "spans")
        }
        out["maxrss_mb"] = res["maxrss_kb"] / 1024
        if res.get("worker_cpu_s") is not None and jobs > 1:
            out["worker_cpu_ms_per_job"] = res["worker_cpu_s"] * 1000 / (jobs - 1)
            out["worker_cores"] = res["worker_cpu_s"] / res["span_s"] if res.get("span_s") else None
        out.update(_per_job(delta, jobs))
        out["noise"] = dict(noise)
        problems = []
        if res.get("started") != jobs:
            problems.append(f"worker started {res.get('started')} of {jobs} jobs")
        left = await self._unfinished(peer, log)
        out["unfinished"] = left
        if left:
            problems.append(f"{left} jobs left unfinished after the worker stopped")
        if problems:
            out["problems"] = problems
        return out

    async def _latency(self, peer: Peer, log: Path) -> dict[str, Any]:
        n = self.cfg.latency_jobs
        db = self.db(peer)
        await self._fresh(peer, log)
        worker = await self._start(
            peer, log, "worker", slots=10, expect=n + 1, mode="serve", **peer.worker_options
        )
        producer = None
        try:
            await worker.until("ready", 60)
            producer = await self._start(peer, log, "produce", jobs=n, rate=self.cfg.latency_rate)
            await producer.until("warm_sent", 60)
            await worker.until("first_job", 60)
            async with self.admin.noise(db) as noise:
                await producer.send("go")
                sent = await producer.until("result", 60 + 2 * n / self.cfg.latency_rate)
                res = await worker.until("result", 60)
            await producer.finish()
            await worker.finish()
        finally:
            worker.kill()
            if producer is not None:
                producer.kill()
        lat = sorted(res.get("latencies_ms") or [])
        out: dict[str, Any] = {
            "samples": len(lat),
            "late_sends": sent.get("late_sends"),
            "maxrss_mb": res["maxrss_kb"] / 1024,
            "noise": dict(noise),
        }
        for p in (50, 95, 99):
            out[f"p{p}"] = nearest_rank(lat, p)
        out["max"] = lat[-1] if lat else None
        problems = []
        if len(lat) != n:
            problems.append(f"{len(lat)} of {n} latency samples")
        left = await self._unfinished(peer, log)
        if left:
            problems.append(f"{left} jobs left unfinished after the worker stopped")
        if problems:
            out["problems"] = problems
        return out


def nearest_rank(sorted_values: list[float], p: float) -> float | None:
    if not sorted_values:
        return None
    rank = max(1, math.ceil(p / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


def _per_job(delta: dict[str, Any], jobs: int) -> dict[str, Any]:
    out = {f"{k}_per_job": (v / jobs if v is not None else None) for k, v in delta.items()}
    out["pg_delta"] = delta
    return out
