"""The systems the bench runs, and how each one is started."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
ADAPTERS_DIR = BENCH_DIR / "adapters"
PINS_DIR = BENCH_DIR / "pins"


@dataclass(frozen=True)
class Peer:
    name: str  # database bench_<name>, log names, --peers
    label: str  # the row label in the report
    adapter: str  # script under bench/adapters
    venv: str | None  # venv under bench/.venvs built from bench/pins/<venv>.txt; None: this python
    worker_options: dict[str, Any] = field(default_factory=dict)
    #: sent with every request (enqueue, worker...): a configuration of the system
    options: dict[str, Any] = field(default_factory=dict)
    min_python: tuple[int, int] = (3, 11)
    note: str = ""
    #: runs akadze/ as committed at --base-ref instead of the run's akadze
    base: bool = False

    @property
    def script(self) -> Path:
        return ADAPTERS_DIR / self.adapter

    @property
    def pins(self) -> Path | None:
        return PINS_DIR / f"{self.venv}.txt" if self.venv else None


PEERS: dict[str, Peer] = {
    p.name: p
    for p in [
        Peer(
            "akadze",
            "akadze",
            "adapter_akadze.py",
            None,
            note="runs with the interpreter that runs `python -m bench` (the repo's .venv)",
        ),
        Peer(
            "akadze_base",
            "akadze at --base-ref",
            "adapter_akadze.py",
            None,
            base=True,
            note="as akadze, but the akadze/ of the commit given by --base-ref: an earlier version "
            "measured in the same run, for regressions",
        ),
        Peer(
            "akadze_ps",
            "akadze, prepared statements",
            "adapter_akadze.py",
            None,
            options={"prepared_statements": True},
            note="as akadze, with Akadze(prepared_statements=True): not behind a transaction-mode pooler",
        ),
        Peer(
            "akadze_obs",
            "akadze, metrics + tracing",
            "adapter_akadze.py",
            None,
            options={"observe": True, "sample": 0.1},
            note="as akadze, with Prometheus metrics served and scraped every second and "
            "OpenTelemetry tracing on (SDK, ParentBased(TraceIdRatioBased(0.1)): a tenth of the "
            "traces sampled at the root, batch processor, an exporter that drops the spans)",
        ),
        Peer(
            "akadze_obs_1",
            "akadze, metrics + tracing, a hundredth sampled",
            "adapter_akadze.py",
            None,
            options={"observe": True, "sample": 0.01},
            note="as akadze_obs, with a hundredth of the traces sampled at the root: what the "
            "SDK's recorded spans cost, by difference",
        ),
        Peer(
            "akadze_obs_all",
            "akadze, metrics + tracing, every run recorded",
            "adapter_akadze.py",
            None,
            options={"observe": True},
            note="as akadze_obs, with the SDK's default sampler: every trace sampled, every run recorded",
        ),
        Peer(
            "akadze_cli",
            "akadze, worker through the command line",
            "adapter_akadze.py",
            None,
            options={"cli": True},
            note="as akadze, with the drain's worker run by the `akadze worker APP --burst --slots c` "
            "command (akadze.cli.main, in a thread of the adapter): the worker's peak RSS holds "
            "what the command line imports; the other steps are akadze's",
        ),
        Peer(
            "akadze_cli_base",
            "akadze at --base-ref, worker through the command line",
            "adapter_akadze.py",
            None,
            options={"cli": True},
            base=True,
            note="as akadze_cli, with the akadze/ of --base-ref",
        ),
        Peer(
            "akadze_metrics",
            "akadze, metrics",
            "adapter_akadze.py",
            None,
            options={"observe": "metrics"},
            note="as akadze_obs, with the Prometheus metrics alone",
        ),
        Peer(
            "akadze_tracing",
            "akadze, tracing",
            "adapter_akadze.py",
            None,
            options={"observe": "tracing", "sample": 0.1},
            note="as akadze_obs, with the OpenTelemetry tracing alone (a tenth of the traces sampled)",
        ),
        Peer(
            "akadze_unique",
            "akadze, unique jobs",
            "adapter_akadze.py",
            None,
            options={"flow": "unique"},
            note="as akadze, with @app.task(..., unique=Unique(args=['i'])): every enqueue computes a "
            "key and goes through the unique index (each job's arguments differ: none is a duplicate)",
        ),
        Peer(
            "akadze_limit",
            "akadze, limit never binding",
            "adapter_akadze.py",
            None,
            options={"flow": "limit"},
            note="as akadze, with limit=Limit(concurrency=1_000_000): the worker claims with "
            "claim_limited.sql and writes its limit group's row once per claim, and the limit never holds a "
            "job back",
        ),
        Peer(
            "akadze_keyed",
            "akadze, concurrency 1 per key, 100 keys",
            "adapter_akadze.py",
            None,
            options={"flow": "keyed"},
            note="as akadze, with limit=Limit(concurrency=1, key='k') and k = i % 100: at most one job "
            "per key runs at a time, so at most 100 at once (more than the 50 slots of drain_c50)",
        ),
        Peer(
            "raw",
            "raw asyncpg, k=50",
            "adapter_raw.py",
            "raw",
            {"k": 50},
            note="c loops, one connection each, claim up to 50 per statement, complete per batch",
        ),
        Peer(
            "raw_k1",
            "raw asyncpg, k=1",
            "adapter_raw.py",
            "raw",
            {"k": 1},
            note="as raw but one job per claim (one claim + one completion transaction per job)",
        ),
        Peer("pgqueuer", "pgqueuer", "adapter_pgqueuer.py", "pgqueuer"),
        Peer("procrastinate", "procrastinate", "adapter_procrastinate.py", "procrastinate"),
        Peer("oban", "oban (Python, OSS)", "adapter_oban.py", "oban", min_python=(3, 12)),
    ]
}

DEFAULT_PEERS = ["akadze", "akadze_ps", "raw", "pgqueuer", "procrastinate", "oban"]
