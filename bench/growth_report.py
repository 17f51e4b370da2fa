"""The Markdown report of ``python -m bench.growth``: tables from the results it collected."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.growth import DEFAULT_INTRO, MARKER, STATES, VACUUM_SCALE_FACTOR, VACUUM_THRESHOLD


def fmt(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def cell(vals: list[float], digits: int = 0) -> str:
    """median (min-max)"""
    if not vals:
        return "-"
    med = statistics.median(vals)
    if len(vals) == 1:
        return fmt(med, digits)
    return f"{fmt(med, digits)} ({fmt(min(vals), digits)}-{fmt(max(vals), digits)})"


def ratio_cell(drains: list[dict[str, Any]], state: str, key: Callable[[dict[str, Any]], float]) -> str:
    """state / empty within each repeat, then the median."""
    by_rep: dict[int, dict[str, float]] = {}
    for r in drains:
        by_rep.setdefault(r["rep"], {})[r["state"]] = key(r)
    ratios = [reps[state] / reps["empty"] for reps in by_rep.values() if state in reps and reps.get("empty")]
    if not ratios:
        return "-"
    if len(ratios) == 1:
        return f"{ratios[0]:.2f}"
    return f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def explain_cells(summary: dict[str, Any] | None) -> list[str]:
    """buffers and ms of an EXPLAIN summary"""
    if summary is None:
        return ["-", "-"]
    return [fmt(summary["buffers"]), fmt(summary["execution_ms"], 2)]


def mb(kb: float | None) -> float | None:
    return None if kb is None else kb / 1024


def render(data: dict[str, Any]) -> str:
    meta, drains, memory = data["meta"], data["drains"], data["memory"]
    opt = meta["options"]
    server = meta["server"]
    lines = [
        f"## Results of the last run ({meta['started'].replace('T', ' ').replace('+00:00', ' UTC')})",
        "",
        f"{meta['cpus']} CPUs; {server['version'].split(' on ')[0]} on the same host (shared_buffers "
        f"{server['shared_buffers']}, synchronous_commit {server['synchronous_commit']}, autovacuum "
        f"{server['autovacuum']}); akadze "
        f"{meta['akadze']['version']} from commit {meta['akadze_source']['commit']}"
        f"{' with local changes' if meta['akadze_source']['dirty'] == 'yes' else ''}. "
        f"Run time {meta['minutes']:.1f} min.",
        "",
        f"Machine load: `{meta['uptime_start']}` at the start, `{meta['uptime_end']}` at the end.",
        "",
    ]
    labels = {
        "empty": "(a) empty",
        "finished": f"(b) {opt['finished']:,} finished rows",
        "delayed": f"(c) {opt['delayed']:,} delayed jobs",
        "delayed_high": f"(d) {opt['delayed']:,} delayed jobs at priority 1",
        "held": f"(e) {opt.get('held', opt['delayed']):,} jobs held by a full limit, ahead of the ready ones",
        "limited_empty": "(e0) empty, the worker claiming with claim_limited (baseline of (e)-(e5))",
        "held_1m": f"(e1) {opt.get('held_big', 0):,} jobs held by a full limit (no key), ahead",
        "hot_key": f"(e2) {opt.get('held_big', 0):,} jobs of one key held by a keyed limit, ahead",
        "many_keys": f"(e3) {opt.get('held', 0):,} jobs of 10,000 keys held by a keyed limit (each key full)",
        "fair_key": f"(e4) {opt.get('held_big', 0):,} jobs of one key of a fair share (no ceiling), ahead",
        "limited_delayed_high": f"(e5) {opt['delayed']:,} delayed jobs at priority 1, claim_limited",
        "held_parked": "(e6) as (e), the held jobs parked and vacuumed before the drain",
        "held_1m_parked": "(e7) as (e1), the held jobs parked and vacuumed before the drain",
        "hot_key_parked": "(e8) as (e2), the held jobs parked and vacuumed before the drain",
        "held_1m_arrived": "(e9) as (e1), parked by their enqueue (a producer that knows the Limit)",
        "hot_key_arrived": "(e10) as (e2), parked by their enqueue (a producer that knows the Limit)",
    }
    seen = list(dict.fromkeys(r["state"] for r in drains))
    for s in seen:
        if s.startswith("queues_"):
            n = int(s.split("_")[1])
            how = {"each": "claim.sql forced (a scan per queue)", "many": "claim_many.sql forced"}.get(
                s.rsplit("_", 1)[-1], "the fetcher's claim"
            )
            labels[s] = f"(f) the ready jobs spread over {n:,} queues, {how}"
    by_state = {s: [r for r in drains if r["state"] == s] for s in [*STATES, *seen]}
    run_states = [s for s in dict.fromkeys([*STATES, *seen]) if by_state[s]]
    lines += [
        f"### Drain: {opt['jobs']:,} ready no-op jobs, one worker, {opt['slots']} slots",
        "",
        f"{opt['repeat']} repeat(s), the states interleaved; cells are median (min-max). The ratio is "
        "taken against the empty table's drain of the same repeat, then the median.",
        "",
    ]
    rows = []
    for s in run_states:
        rs = by_state[s]
        rows.append(
            [
                labels[s],
                cell([r["rate"] for r in rs]),
                "1" if s == "empty" else ratio_cell(drains, s, lambda r: r["rate"]),
                cell([r["first_after_s"] for r in rs if r.get("first_after_s") is not None], 2),
                cell([r["tenths"][0] for r in rs if r["tenths"]]),
                cell([r["tenths"][-1] for r in rs if r["tenths"]]),
                cell([mb(r["peak_rss_kb"]) or 0 for r in rs], 1),
                cell([r["load1"] for r in rs], 1),
            ]
        )
    lines += table(
        [
            "table state",
            "jobs/s",
            "ratio to (a)",
            "first start after s",
            "first tenth jobs/s",
            "last tenth jobs/s",
            "worker peak RSS MB",
            "load avg (1 min)",
        ],
        rows,
    )
    lines += [
        "",
        "### What the claim and the completion cost in each state",
        "",
        f"EXPLAIN (ANALYZE, BUFFERS) of the statements the worker sends, each call rolled back; median of "
        f"{data['meta'].get('explain_calls', 5)} calls per repeat, then median (min-max) over the repeats. "
        f"Buffers are shared blocks hit or read by the execution (planning apart). *Claim {opt['slots']}*: "
        f"the claim of {opt['slots']} jobs with {opt['jobs']:,} ready, before the drain. *Complete "
        f"{opt['slots']}*: the completion (succeeded) of {opt['slots']} just-claimed jobs in one "
        "statement. *Idle claim*: the claim after the drain and a VACUUM, when no job is ready: what an "
        "idle worker's every poll and wake-up costs.",
        "",
    ]
    rows = []
    for s in run_states:
        rs = by_state[s]
        row = [labels[s], cell([r["table_before"]["rows"] for r in rs])]
        for key in ("claim_ready", "complete", "claim_idle"):
            row += [
                cell([r[key]["buffers"] for r in rs]),
                cell([r[key]["execution_ms"] for r in rs], 2),
            ]
        row.append(cell([r["claim_ready"]["planning_ms"] for r in rs], 2))
        rows.append(row)
    lines += table(
        [
            "table state",
            "rows in akadze_jobs",
            f"claim {opt['slots']}: buffers",
            "ms",
            f"complete {opt['slots']}: buffers",
            "ms",
            "idle claim: buffers",
            "ms",
            "claim planning ms",
        ],
        rows,
    )
    small = [s for s in run_states if any("small_key" in r for r in by_state[s])]
    if small:
        lines += [
            "",
            "A key with one job behind a key's backlog (issue 32, points 2 and 3): one job of a new "
            "key is enqueued and one claim is run (rolled back): for (e2) after the drain (the worker "
            "parked the backlog), for (e4) before the ready jobs go in (the backlog parked as claims "
            "leave it, its group due).",
            "",
        ]
        lines += table(
            [
                "table state",
                "jobs parked then",
                "claim: jobs taken",
                "buffers",
                "ms",
                "the new key's job taken",
            ],
            [
                [
                    labels[s],
                    cell([r.get("parked", 0) for r in by_state[s]]),
                    cell([r["small_key_jobs"] for r in by_state[s] if "small_key_jobs" in r]),
                    cell([r["small_key"]["buffers"] for r in by_state[s] if "small_key" in r]),
                    cell([r["small_key"]["execution_ms"] for r in by_state[s] if "small_key" in r], 2),
                    "/".join("yes" if r.get("small_key_taken") else "no" for r in by_state[s]),
                ]
                for s in small
            ],
        )
    plans: dict[str, set[str]] = {}
    for r in drains:
        plans.setdefault(", then ".join(r["claim_ready"]["plan"]), set()).add(labels[r["state"]])
    lines += ["", "How the claim reads akadze_jobs (the pick, then the update's join):", ""]
    lines += [f"- {plan}: {', '.join(sorted(states))}" for plan, states in sorted(plans.items())]
    if memory:
        lines += ["", *render_memory(memory, opt, server)]
    problems = [f"{r['state']} repeat {r['rep'] + 1}: {p}" for r in drains for p in r["problems"]]
    problems += [f"memory run: {p}" for p in memory.get("problems", [])]
    lines += ["", "### Checks", ""]
    lines += [f"- {p}" for p in problems] or [
        "- Every drain started every job and left no ready or running job behind"
        + ("; every job of the memory run succeeded." if memory else ".")
    ]
    return "\n".join(lines) + "\n"


def render_memory(memory: dict[str, Any], opt: dict[str, Any], server: dict[str, Any]) -> list[str]:
    samples = memory["samples"]
    by_jobs = {s["jobs"]: s for s in samples}
    at_first_chunk = by_jobs.get(opt["chunk"])
    at_end = by_jobs.get(memory["jobs"])
    lines = [
        f"### Worker memory over {memory['jobs']:,} jobs",
        "",
        f"One worker process serving ({opt['slots']} slots, default services: heartbeat, listener, "
        f"rescuer, scheduler, pruner with the default 7-day retention), fed {memory['chunk']:,} jobs at a "
        "time by SQL. The task body reads the process's own `/proc/self/status` at every "
        f"{memory['chunk']:,}th job start; jobs/s and worker CPU are since the previous row. At the "
        f"same moments the harness runs the claim of {opt['slots']} and the completion of "
        f"{opt['slots']} on the live table under EXPLAIN (ANALYZE, BUFFERS), rolled back (median of the "
        "calls), and reads the table's size, dead tuples and vacuum count from the statistics views.",
        "",
    ]
    vacuums = memory["stand_in_vacuums"]
    if memory["vacuum_stand_in"]:
        done = ", ".join(
            f"{v['at_s']:.0f} s ({v['dead']:,} dead tuples, {v['seconds']:.1f} s)" for v in vacuums
        )
        lines += [
            "The server runs with autovacuum off, so the harness stood in for it: every "
            f"autovacuum_naptime ({server['autovacuum_naptime_s']:.0f} s) it ran `VACUUM (ANALYZE) "
            f"akadze_jobs` when the dead tuples passed {VACUUM_THRESHOLD} + {VACUUM_SCALE_FACTOR} x "
            "reltuples (akadze_jobs' own autovacuum settings). "
            + (f"VACUUMs at {done} into the run." if vacuums else "It never had to."),
            "",
        ]
    elif server["autovacuum"] == "off":
        lines += [
            "The server runs with autovacuum off and this run did not stand in for it "
            "(`--no-vacuum-stand-in`): nothing removed dead tuples during the run.",
            "",
        ]
    rows = []
    for prev, s in zip([None, *samples], samples, strict=False):
        rate = cpu = None
        if prev is not None and s["t"] > prev["t"]:
            rate = (s["jobs"] - prev["jobs"]) / (s["t"] - prev["t"])
            cpu = (s["cpu_s"] - prev["cpu_s"]) * 1000 / (s["jobs"] - prev["jobs"])
        rows.append(
            [
                f"{s['jobs']:,}",
                fmt(mb(s["vmrss"]), 1),
                fmt(mb(s["vmhwm"]), 1),
                fmt(rate),
                fmt(cpu, 3),
                *explain_cells(s.get("claim")),
                *explain_cells(s.get("complete")),
                fmt(s["table_bytes"] / 2**20) if "table_bytes" in s else "-",
                fmt(s.get("n_dead_tup")),
                fmt(s.get("vacuums")),
                fmt(s.get("load1"), 1),
            ]
        )
    lines += table(
        [
            "jobs started",
            "VmRSS MB",
            "VmHWM MB",
            "jobs/s",
            "worker CPU ms/job",
            f"claim {opt['slots']}: buffers",
            "ms",
            f"complete {opt['slots']}: buffers",
            "ms",
            "table + indexes MB",
            "dead tuples",
            "(auto)vacuums",
            "load avg (1 min)",
        ],
        rows,
    )
    peak = mb(memory["after_run"]["vmhwm"])
    lines += [""]
    if at_first_chunk and at_end:
        r0, r1 = mb(at_first_chunk["vmrss"]), mb(at_end["vmrss"])
        assert r0 is not None and r1 is not None
        growth = (r1 - r0) / r0 * 100
        lines += [
            f"- **Peak RSS {fmt(peak, 1)} MB** (VmHWM after the run; target at most 60 MB). RSS "
            f"{fmt(r0, 1)} MB at {opt['chunk']:,} jobs and {fmt(r1, 1)} MB at {memory['jobs']:,}: "
            f"**{growth:+.1f} %** (target below 5 %).",
        ]
    lines += [
        f"- Whole run: **{fmt(memory['rate'])} jobs/s** from the first job start to the last "
        f"({memory['span_s'] / 60:.1f} min), while the finished rows piled up to "
        f"{memory['table_after']['rows']:,} ({memory['table_after']['table_bytes'] / 2**20:,.0f} MB "
        "with indexes; nothing is old enough to prune).",
    ]
    running = memory["running_per_s"]
    if running:
        at_s, most = max(running, key=lambda point: point[1])
        lines.append(
            "- Jobs running in the database (claimed, outcome not yet written), polled once a second: "
            f"median {statistics.median(n for _, n in running):,.0f}, at most **{most:,}** "
            f"({at_s:.0f} s into the run), for {opt['slots']} slots."
        )
    return lines


def write_markdown(data: dict[str, Any], path: Path) -> None:
    intro = DEFAULT_INTRO
    if path.exists():
        text = path.read_text()
        if MARKER in text:
            intro = text.split(MARKER, 1)[0].rstrip("\n") + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(intro + "\n" + MARKER + "\n\n" + render(data))
