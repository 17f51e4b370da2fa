"""``akadze codegen verify``: do the generated stubs match the workers running now?

Workers publish what they run when they register (``akadze_task_schemas``: per worker and task,
the queue and the argument-schema fingerprint; the rows go with the worker). For every task of
a manifest (the generated package's ``_manifest.json``), among the *live* workers (heartbeat
within their own ``lost_after``):

- ``unconsumed``: no live worker serves the stub's queue, so its jobs would never run;
- ``error``: live workers serve the queue but none runs the task there, or they register it
  with another queue, or with another argument fingerprint (both fingerprints named);
- ``note``: the stub matches, but some other live worker on the queue runs another version
  (a rolling deploy); informational only;
- ``ok``: a live worker serving the stub's queue runs the task with the same fingerprint.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from akadze.db.queries import Connection, LiveTask, Queries
from akadze_codegen import signature as ir

Level = Literal["ok", "note", "unconsumed", "error"]


@dataclass(frozen=True, slots=True)
class Finding:
    """One line of ``akadze codegen verify``: a stub, its level and what was found."""

    level: Level
    task: str
    message: str

    def render(self, width: int = 0) -> str:
        """The line ``akadze codegen verify`` prints."""
        label = {"ok": "ok", "note": "note", "unconsumed": "WARNING", "error": "ERROR"}[self.level]
        return f"{label:<9}{self.task:<{width}}  {self.message}"


def check(manifest: ir.Manifest, live: Sequence[LiveTask]) -> list[Finding]:
    """Compare the stubs with what live workers published (pure; the rows of
    ``Queries.live_task_schemas``)."""
    serving: dict[str, set[str]] = {}
    silent: set[str] = set()
    runs: dict[str, list[LiveTask]] = {}
    for row in live:
        for queue in row.worker_queues:
            serving.setdefault(queue, set()).add(row.worker_id)
        if row.task is None:
            silent.add(row.worker_id)
        else:
            runs.setdefault(row.task, []).append(row)
    findings: list[Finding] = []
    for stub in sorted(manifest.tasks, key=lambda t: t.name):
        consumers = serving.get(stub.queue, set())
        registered = runs.get(stub.name, [])
        if not consumers:
            elsewhere = sorted({r.queue for r in registered if r.queue})
            hint = f"; live workers run the task on {_names(elsewhere)}" if elsewhere else ""
            text = f"no live worker consumes queue {stub.queue!r}: its jobs would never run{hint}"
            findings.append(Finding("unconsumed", stub.name, text))
            continue
        here = [r for r in registered if r.worker_id in consumers]
        if not here:
            text = f"no live worker on queue {stub.queue!r} runs this task: its jobs would fail as unknown"
            if consumers & silent:
                text += (
                    f" ({len(consumers & silent)} of them published no task list: an akadze without "
                    "task schemas; upgrade it)"
                )
            findings.append(Finding("error", stub.name, text))
            continue
        matching = [r for r in here if r.queue == stub.queue and r.args_fp == stub.args_fp]
        if matching:
            count = len({r.worker_id for r in matching})
            text = (
                f"queue {stub.queue!r}, args_fp {stub.args_fp}, {count} live worker{'s' if count > 1 else ''}"
            )
            findings.append(Finding("ok", stub.name, text))
            others = sorted({f"{r.args_fp} on {r.queue!r}" for r in here if r not in matching})
            if others:
                text = (
                    f"other live workers on queue {stub.queue!r} run {', '.join(others)} (a rolling deploy?)"
                )
                findings.append(Finding("note", stub.name, text))
            continue
        queues = sorted({r.queue for r in here if r.queue})
        if stub.queue not in queues:
            text = (
                f"queue differs: the stub enqueues into {stub.queue!r}, live workers register the "
                f"task on {_names(queues)}; regenerate the client (akadze codegen)"
            )
            findings.append(Finding("error", stub.name, text))
        fps = sorted({r.args_fp for r in here if r.args_fp})
        if stub.args_fp not in fps:
            plural = "s" if len(fps) > 1 else ""
            text = (
                f"argument fingerprint differs: stub {stub.args_fp}, live worker{plural} "
                f"{', '.join(fps)}; regenerate the client (akadze codegen) or deploy the matching worker "
                "(`akadze codegen diff` tells whether old jobs still decode)"
            )
            findings.append(Finding("error", stub.name, text))
    return findings


def _names(values: Sequence[str]) -> str:
    return ", ".join(repr(v) for v in values)


async def verify(conn: Connection, manifest: ir.Manifest) -> list[Finding]:
    """The findings for ``manifest`` on a connection of the caller's (an ``AsyncConnection``,
    or the asyncpg connection under one): for a producer's own start-up or health check."""
    return check(manifest, await Queries.live_task_schemas(conn))


async def live_tasks(database_url: str) -> list[LiveTask]:
    """What live workers published, read from the database at ``database_url``."""
    from akadze.app import Akadze

    app = Akadze(database_url=database_url, pool_size=1)
    try:
        async with app.engine.connect() as conn:
            return await Queries.live_task_schemas(conn)
    finally:
        await app.dispose()


def report(
    manifest: ir.Manifest, findings: Sequence[Finding], live: Sequence[LiveTask], *, allow_unconsumed: bool
) -> int:
    """Print the findings and a summary; returns the exit code (0 or 1)."""
    width = max((len(f.task) for f in findings), default=0)
    for finding in findings:
        print(finding.render(width))
    errors = sum(f.level == "error" for f in findings)
    unconsumed = sum(f.level == "unconsumed" for f in findings)
    workers = len({r.worker_id for r in live})
    print(
        f"akadze codegen verify: {len(manifest.tasks)} stub(s), "
        f"{errors} error(s), {unconsumed} on unconsumed queues; {workers} live worker(s)"
    )
    if errors:
        print("Exit 1: stubs do not match the live workers.", file=sys.stderr)
        return 1
    if unconsumed and not allow_unconsumed:
        print("Exit 1: jobs of these stubs would never run (--allow-unconsumed to accept).", file=sys.stderr)
        return 1
    return 0


def run_verify(database_url: str, source: str, *, allow_unconsumed: bool) -> int:
    """``akadze codegen verify``: 0 every stub matches, 1 a mismatch or (unless
    ``allow_unconsumed``) an unconsumed queue, 2 the manifest cannot be read. Database errors
    propagate (the command line turns them into exit 2)."""
    import asyncio

    from akadze_codegen.diff import ManifestInputError, read_manifest

    try:
        manifest = read_manifest(source)
    except ManifestInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    live = asyncio.run(live_tasks(database_url))
    return report(manifest, check(manifest, live), live, allow_unconsumed=allow_unconsumed)
