"""`python -m bench`: run akadze and its peers on one PostgreSQL server, interleaved and
repeated, and regenerate docs/performance.md (see bench/README.md)."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.peers import BENCH_DIR, DEFAULT_PEERS, PEERS, REPO_DIR, Peer
from bench.pg import Admin
from bench.proc import AKADZE_PATH, AdapterError, call, snapshot_akadze
from bench.steps import Config, Runner
from bench.venvs import VenvError, ensure_venv, find_base_python

STEPS = ["enqueue_single", "enqueue_batch", "drain_c10", "drain_c50", "latency"]
RESULTS_DIR = BENCH_DIR / "results"
DOC = REPO_DIR / "docs" / "performance.md"


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    ap.add_argument(
        "--dsn",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="maintenance database; each peer gets bench_<peer> on the same server",
    )
    ap.add_argument("--repeat", type=int, default=None, help="interleaved repeats (default 3)")
    ap.add_argument("--jobs", type=int, default=None, help="jobs per enqueue/drain step (20000)")
    ap.add_argument("--batch", type=int, default=1000, help="jobs per batch enqueue call")
    ap.add_argument("--latency-jobs", type=int, default=500)
    ap.add_argument("--latency-rate", type=float, default=100.0, help="jobs/s for latency")
    ap.add_argument("--peers", default=",".join(DEFAULT_PEERS), help=f"comma list from {', '.join(PEERS)}")
    ap.add_argument("--steps", default=",".join(STEPS), help=f"comma list from {', '.join(STEPS)}")
    ap.add_argument("--no-codec", action="store_true", help="skip the codec micro-benchmark")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: 2,000 jobs, 1 repeat; writes bench/results/quick.* only",
    )
    ap.add_argument(
        "--output",
        type=Path,
        default=None,
        help="Markdown file to regenerate (default docs/performance.md; bench/results/quick.md with --quick)",
    )
    ap.add_argument(
        "--akadze-ref",
        default=None,
        help="bench akadze/ as committed at this git ref (e.g. HEAD) instead of the working tree",
    )
    ap.add_argument(
        "--base-ref",
        default=None,
        help="the akadze_base peer runs akadze/ as committed at this git ref: two versions side by side",
    )
    ap.add_argument(
        "--from-json",
        type=Path,
        default=None,
        help="run nothing: regenerate the Markdown and the chart from a results file",
    )
    ap.add_argument(
        "--peer-python", default=None, help="interpreter for the peer venvs (default: a Python 3.12)"
    )
    args = ap.parse_args(argv)
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.jobs = args.jobs or (2000 if args.quick else 20000)
    return args


async def prepare_peers(
    names: list[str], peer_python: str | None
) -> tuple[dict[str, str], dict[str, dict[str, Any]], dict[str, str]]:
    """Build venvs, ask every adapter for its versions. Returns pythons, infos, skipped."""
    pythons: dict[str, str] = {}
    infos: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    base, base_version = find_base_python(peer_python)
    log(f"peer venvs from {base} ({'.'.join(map(str, base_version))})")
    for name in names:
        peer = PEERS[name]
        try:
            if peer.venv is None:
                python = sys.executable
            else:
                if base_version[:2] < peer.min_python:
                    raise VenvError(
                        f"needs Python {'.'.join(map(str, peer.min_python))}+,"
                        f" found {'.'.join(map(str, base_version))}"
                    )
                assert peer.pins is not None
                python = await asyncio.to_thread(ensure_venv, peer.venv, peer.pins, base, log)
            info = await call(
                python,
                peer.script,
                {"cmd": "info", "dsn": ""},
                BENCH_DIR / "logs" / f"{name}.info.log",
                with_repo=peer.venv is None,
                timeout=120,
                base=peer.base,
            )
            info.pop("event", None)
            pythons[name], infos[name] = python, info
            log(f"{name}: {info.get('library')} {info.get('version')} on Python {info['python']}")
        except (VenvError, AdapterError, OSError) as exc:
            skipped[name] = str(exc)
            log(f"{name}: SKIPPED ({exc})")
    return pythons, infos, skipped


def run_codec(repeat: int) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.codec_bench", "--json"],
        capture_output=True,
        text=True,
        cwd=REPO_DIR,
        timeout=600,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(map(str, [*AKADZE_PATH, REPO_DIR]))},
    )
    if proc.returncode != 0:
        return {"skipped": f"codec micro-benchmark failed: {proc.stderr.strip()[-300:]}"}
    return json.loads(proc.stdout)


async def main_async(args: argparse.Namespace) -> int:
    names = [n.strip() for n in args.peers.split(",") if n.strip()]
    steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    for n in names:
        if n not in PEERS:
            sys.exit(f"unknown peer {n!r}; known: {', '.join(PEERS)}")
    for s in steps:
        if s not in STEPS:
            sys.exit(f"unknown step {s!r}; known: {', '.join(STEPS)}")
    started = time.time()
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    log_dir = BENCH_DIR / "logs" / stamp

    admin = Admin(args.dsn)
    try:
        await admin.open()
    except (OSError, Exception) as exc:  # asyncpg raises many kinds
        sys.exit(f"cannot connect to {args.dsn}: {exc}")
    server = await admin.server_info()
    log(f"PostgreSQL {server['server_version']} at {args.dsn}")

    snapshot_dir = BENCH_DIR / ".snapshot" / stamp
    akadze_src = snapshot_akadze(snapshot_dir, args.akadze_ref) if "akadze" in names else {}
    if akadze_src:
        log(
            f"akadze frozen for this run from commit {akadze_src['commit']}"
            f" (local changes in akadze/: {akadze_src['dirty']})"
        )
    if "akadze_base" in names:
        if not args.base_ref:
            sys.exit("the akadze_base peer needs --base-ref REF (the commit it runs)")
        base_src = snapshot_akadze(snapshot_dir / "base", args.base_ref, base=True)
        akadze_src["base_commit"] = base_src["commit"]
        log(f"akadze_base frozen for this run from commit {base_src['commit']}")
    pythons, infos, skipped = await prepare_peers(names, args.peer_python)
    active: list[Peer] = [PEERS[n] for n in names if n in pythons]
    cfg = Config(args.dsn, args.jobs, args.batch, args.latency_jobs, args.latency_rate, log_dir)
    runner = Runner(admin, cfg, pythons)

    records: list[dict[str, Any]] = []
    codec_runs: list[dict[str, Any]] = []
    try:
        for rep in range(args.repeat):
            for step in steps:
                shift = rep % max(1, len(active))
                for peer in active[shift:] + active[:shift]:
                    rec = await runner.run(step, peer, rep)
                    records.append(rec)
                    log(f"rep {rep + 1}/{args.repeat} {step:<14} {peer.name:<13} " + describe(rec))
            if not args.no_codec:
                codec = await asyncio.to_thread(run_codec, rep)
                codec_runs.append(codec)
                log(f"rep {rep + 1}/{args.repeat} codec          " + (codec.get("skipped") or "ok"))
    finally:
        await admin.close()
        shutil.rmtree(BENCH_DIR / ".snapshot", ignore_errors=True)

    meta = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "duration_s": time.time() - started,
        "repeat": args.repeat,
        "jobs": args.jobs,
        "batch": args.batch,
        "latency_jobs": args.latency_jobs,
        "latency_rate": args.latency_rate,
        "steps": steps,
        "peers": [p.name for p in active],
        "labels": {p.name: p.label for p in PEERS.values()},
        "peer_notes": {p.name: p.note for p in active if p.note},
        "skipped": skipped,
        "infos": infos,
        "server": server,
        "host": host_info(),
        "harness_python": platform.python_version(),
        "akadze_source": akadze_src,
        "wal_note": runner.admin.wal_note,
        "quick": args.quick,
        "log_dir": str(log_dir.relative_to(REPO_DIR)),
    }
    data = {"meta": meta, "records": records, "codec": codec_runs}
    write_outputs(data, args)
    failed = [r for r in records if not r.get("ok")]
    return 1 if failed and len(failed) == len(records) else 0


def write_outputs(data: dict[str, Any], args: argparse.Namespace, results_json: Path | None = None) -> None:
    from bench import report  # imported late: only the end of a run needs it

    quick = bool(data["meta"].get("quick"))
    base = RESULTS_DIR / ("quick" if quick else "performance")
    out_md = args.output or (RESULTS_DIR / "quick.md" if quick else DOC)
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    if results_json is None:
        results_json = base.with_suffix(".json")
        results_json.write_text(json.dumps(data, indent=1) + "\n")
    png = base.with_suffix(".png")
    chart_ok = report.draw_chart(data, png, log, args.peer_python)
    report.write_markdown(data, out_md, png if chart_ok else None)
    log(f"wrote {_show(out_md)} and {_show(png) if chart_ok else 'no chart'} from {_show(results_json)}")


def _show(path: Path) -> str:
    return str(path.relative_to(REPO_DIR)) if path.is_relative_to(REPO_DIR) else str(path)


def describe(rec: dict[str, Any]) -> str:
    if not rec.get("ok"):
        return "FAILED: " + "; ".join(rec.get("problems", []))
    if rec["step"] == "latency":
        return f"p50 {rec['p50']:.1f} p95 {rec['p95']:.1f} p99 {rec['p99']:.1f} ms"
    extra = ""
    if rec.get("xacts_per_job") is not None:
        wal = rec.get("wal_bytes_db_per_job")
        extra = f", {rec['xacts_per_job']:.3f} xacts/job" + (
            f", {wal:.0f} WAL B/job" if wal is not None else ""
        )
    return f"{rec['rate']:,.0f} jobs/s{extra} ({rec['wall_s']:.1f} s)"


def host_info() -> dict[str, Any]:
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
        mem = f"{kb / 1024 / 1024:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "memory": mem, "cpu": cpu, "kernel": platform.release()}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json is not None:
        write_outputs(json.loads(args.from_json.read_text()), args, args.from_json)
        return 0
    try:
        return asyncio.run(_stoppable(main_async(args)))
    except (KeyboardInterrupt, asyncio.CancelledError):
        log("interrupted: adapters stopped, bench databases dropped, nothing written")
        return 130


async def _stoppable(coro: Any) -> int:
    """SIGTERM cancels the run like Ctrl-C does: every adapter process is killed and every
    bench database dropped on the way out (the finally blocks of the steps)."""
    task = asyncio.ensure_future(coro)
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    return int(await task)
