"""The Markdown of ``python -m bench.workflows``: one table per measurement, each against its
baseline of the same run, and the targets of issue 29 as ratios within each repeat."""

from __future__ import annotations

import statistics
from typing import Any


def nearest_rank(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(share * len(ordered)) - 1))]


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:,.0f} ms"


def _pairs(
    records: list[dict[str, Any]], base: str, other: str
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    by_rep: dict[int, dict[str, dict[str, Any]]] = {}
    for rec in records:
        by_rep.setdefault(rec["rep"], {})[rec["case"]] = rec
    return [
        (cases[base], cases[other]) for _, cases in sorted(by_rep.items()) if base in cases and other in cases
    ]


def markdown(data: dict[str, Any]) -> str:
    meta = data["meta"]
    opts = meta["options"]
    src = meta.get("akadze_source", {})
    server = meta["server"]
    lines = [
        "# Workflows: what they cost (issue 29)",
        "",
        f"`python -m bench.workflows{' --quick' if meta.get('quick') else ''}`, {meta['started']} "
        f"to {meta['finished']} ({meta['minutes']:.0f} min), akadze at {src.get('commit', '?')}"
        f"{' with local changes' if src.get('dirty') == 'yes' else ''}; {meta['cpus']} cores; "
        f"{server['version'].split(' on ')[0]}, synchronous_commit {server['synchronous_commit']}; "
        f"load at the start: {meta['uptime_start'].split('load average:')[-1].strip()}, "
        f"at the end: {meta['uptime_end'].split('load average:')[-1].strip()}.",
        "",
    ]
    if data["drains"]:
        lines += _drains(data, opts)
    if data["latency"]:
        lines += _latency(data, opts)
    if data["count"]:
        lines += _count(data)
    if data["waiting"]:
        lines += _waiting(data, opts)
    return "\n".join(lines) + "\n"


def _drains(data: dict[str, Any], opts: dict[str, Any]) -> list[str]:
    pairs = _pairs(data["drains"], "plain", "fanout")
    out = [
        f"## A fan-out of {opts['jobs']:,} steps and one fan-in, against {opts['jobs']:,} plain jobs",
        "",
        f"One worker process, {opts['slots']} slots, no-op tasks; jobs/s from the first start to the last "
        "(the fan-in's, for the workflow), inside the worker; a fresh database per case. The last "
        "columns, a diagnostic: the same steps in a workflow without the fan-in (no edge).",
        "",
        "| repeat | plain jobs/s | workflow jobs/s | workflow ÷ plain | fan-in start after its last parent "
        "| steps without edges jobs/s | ÷ plain |",
        "|---|---|---|---|---|---|---|",
    ]
    completes: dict[str, list[dict[str, Any]]] = {}
    for rec in data["drains"]:
        if "complete" in rec:
            completes.setdefault(rec["case"], []).append(rec["complete"])
    ratios = []
    steps = {rec["rep"]: rec for rec in data["drains"] if rec["case"] == "steps"}
    for plain, fan in pairs:
        ratio = fan["rate"] / plain["rate"]
        ratios.append(ratio)
        bare = steps.get(plain["rep"])
        bare_rate = f"{bare['rate']:,.0f}" if bare else "-"
        bare_ratio = f"{bare['rate'] / plain['rate']:.2f}" if bare else "-"
        out.append(
            f"| {plain['rep'] + 1} | {plain['rate']:,.0f} | {fan['rate']:,.0f} | {ratio:.2f} "
            f"| {_ms(fan.get('fan_in_delay_s'))} | {bare_rate} | {bare_ratio} |"
        )
    if ratios:
        verdict = "met" if statistics.median(ratios) >= 0.8 else "NOT met"
        out += ["", f"Median ratio **{statistics.median(ratios):.2f}** (target 0.8 or more: {verdict})."]
    if completes:
        names = {"plain": "plain jobs", "fanout": "fan-out steps", "steps": "steps without edges"}
        out += [
            "",
            f"The worker's statement writing the outcomes of one claimed batch of {opts['slots']} (all "
            "succeeded) under EXPLAIN (ANALYZE, BUFFERS), claim and all rolled back, before each drain; "
            "median over the repeats of each repeat's median of 5 calls:",
            "",
            "| jobs of the batch | buffers | execution ms |",
            "|---|---|---|",
        ]
        for case, recs in completes.items():
            buffers = statistics.median(r["buffers"] for r in recs)
            ms = statistics.median(r["execution_ms"] for r in recs)
            out.append(f"| {names.get(case, case)} | {buffers:.0f} | {ms:.2f} |")
    problems = [p for rec in data["drains"] for p in rec["problems"]]
    if problems:
        out += ["", f"Problems: {problems}"]
    return [*out, ""]


def _latency(data: dict[str, Any], opts: dict[str, Any]) -> list[str]:
    fan = [d for rec in data["latency"] for d in rec["fan_in"]]
    plain = [d for rec in data["latency"] for d in rec["plain"]]
    out = [
        "## The fan-in's start after its last parent",
        "",
        f"A worker with 10 slots, poll interval 1 s, LISTEN on; {opts['latency']} workflows of "
        f"{opts['latency_parents']} parents and a fan-in per repeat, and as many plain jobs, at "
        f"{opts['latency_rate']:g} a second. The fan-in's start (its claim) minus its last parent's "
        "completion, and a plain job's start minus its enqueue, on the database's clock; nearest rank "
        "over every repeat.",
        "",
        "| | count | p50 | p99 | max |",
        "|---|---|---|---|---|",
    ]
    for name, values in (("fan-in after its last parent", fan), ("plain job after its enqueue", plain)):
        out.append(
            f"| {name} | {len(values)} | {_ms(nearest_rank(values, 0.5))} "
            f"| {_ms(nearest_rank(values, 0.99))} | {_ms(max(values) if values else None)} |"
        )
    p99 = nearest_rank(fan, 0.99)
    if p99 is not None:
        out += [
            "",
            f"Fan-in p99 {_ms(p99)}: within one poll interval (1 s): {'met' if p99 < 1.0 else 'NOT met'}.",
        ]
    short = [rec for rec in data["latency"] if rec["started"] != rec["expect"]]
    if short:
        out += ["", f"Problems: {len(short)} repeats did not start every job"]
    return [*out, ""]


def _count(data: dict[str, Any]) -> list[str]:
    rows = data["count"].get("counts", [])
    out = [
        "## Statements per enqueue",
        "",
        "Messages from the client to the server, counted by a proxy between them: round trips are "
        "Syncs and simple Queries (each waits for the server), statements are Executes and simple "
        "Queries. Cold: the first enqueue of that size on the connection; warm: the next.",
        "",
        "| enqueue | steps or jobs | cold: round trips / statements "
        "| warm: round trips / statements | warm time |",
        "|---|---|---|---|---|",
    ]
    by: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}
    for row in rows:
        by.setdefault((row["kind"], row["size"]), {})[row["phase"]] = row
    for (kind, size), phases in by.items():
        cold, warm = phases.get("cold", {}), phases.get("warm", {})
        name = "`Workflow.enqueue` (a fan-out and its fan-in)" if kind == "workflow" else "`enqueue_many`"
        out.append(
            f"| {name} | {size:,} | {cold.get('round_trips')} / {cold.get('statements')} "
            f"| {warm.get('round_trips')} / {warm.get('statements')} | {_ms(warm.get('seconds'))} |"
        )
    warm = {
        row["size"]: row["statements"] for row in rows if row["kind"] == "workflow" and row["phase"] == "warm"
    }
    if len(warm) == 2:
        same = len(set(warm.values())) == 1
        out += [
            "",
            f"A workflow's statements (warm) at 100 and 10,000 steps: {sorted(warm.items())}: "
            f"{'the same' if same else 'NOT the same'}.",
        ]
    return [*out, ""]


def _waiting(data: dict[str, Any], opts: dict[str, Any]) -> list[str]:
    pairs = _pairs(data["waiting"], "none", "waiting")
    out = [
        f"## The plain claim beside {opts['waiting']:,} waiting steps",
        "",
        f"{opts['plain_jobs']:,} plain jobs drained by the same worker, on a table without workflow "
        "steps and on one "
        f"with {opts['waiting']:,} steps waiting for a root that never runs (its queue is not served); "
        "the claim under EXPLAIN (ANALYZE, BUFFERS) before each drain, median of 5 calls, rolled back.",
        "",
        "| repeat | none: jobs/s | waiting: jobs/s | waiting ÷ none | claim buffers none / waiting "
        "| claim ms none / waiting | waiting steps |",
        "|---|---|---|---|---|---|---|",
    ]
    ratios = []
    for none, wait in pairs:
        ratio = wait["rate"] / none["rate"]
        ratios.append(ratio)
        out.append(
            f"| {none['rep'] + 1} | {none['rate']:,.0f} | {wait['rate']:,.0f} | {ratio:.2f} "
            f"| {none['claim']['buffers']:.0f} / {wait['claim']['buffers']:.0f} "
            f"| {none['claim']['execution_ms']:.2f} / {wait['claim']['execution_ms']:.2f} "
            f"| {wait['waiting']:,} |"
        )
    if ratios:
        verdict = "met" if statistics.median(ratios) >= 0.9 else "NOT met"
        out += ["", f"Median ratio **{statistics.median(ratios):.2f}** (target 0.9 or more: {verdict})."]
        plans = {tuple(rec["claim"]["plan"]) for rec in data["waiting"]}
        out += ["", f"The claim's scans of akadze_jobs: {sorted(plans)}."]
    problems = [p for rec in data["waiting"] for p in rec["problems"]]
    if problems:
        out += ["", f"Problems: {problems}"]
    return [*out, ""]
