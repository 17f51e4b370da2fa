"""``akadze codegen diff``: what a manifest change means for producers already deployed.

Compares two manifests (old: what producers were built against; new: the worker now), task by
task, parameter by parameter, down into mirrored types, *structurally*: a mirror renamed in
Python but identical on the wire is no change. Each change gets a verdict for producers built
against the old manifest (``breaking``: their jobs would fail or never run; ``safe``) and a
deploy order, found by running the comparison the other way too (new producers against the old
worker): a change safe that way ships producers first, one safe neither way ships in steps.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import msgspec

from akadze_codegen import signature as ir
from akadze_codegen.changes import Change, Order, Verdict, requirement_changed
from akadze_codegen.compat import TypeComparison, describe
from akadze_codegen.problems import AkadzeCodegenError
from akadze_codegen.write import MANIFEST_FILE

__all__ = ["Change", "ManifestInputError", "advice", "diff", "parse_manifest", "read_manifest", "run_diff"]


class ManifestInputError(AkadzeCodegenError):
    """A manifest cannot be read: no file, git failed, not JSON, unknown format (exit 2)."""


# -- reading manifests --------------------------------------------------------------------------


def read_manifest(spec: str, *, cwd: Path | None = None) -> ir.Manifest:
    """A manifest from a file, a generated package directory, or ``GIT_REF:path`` (git show)."""
    raw, label = _read_source(spec, cwd or Path.cwd())
    return parse_manifest(raw, label)


def _read_source(spec: str, cwd: Path) -> tuple[bytes, str]:
    path = cwd / spec
    if path.is_dir():
        path = path / MANIFEST_FILE
    if path.is_file():
        try:
            return path.read_bytes(), spec
        except OSError as exc:
            raise ManifestInputError(f"{spec}: cannot read it ({exc.strerror or exc})") from None
    ref, sep, inner = spec.partition(":")
    if not sep or not ref or not inner:
        raise ManifestInputError(
            f"{spec}: no such file; give a manifest file, a generated package directory, "
            "or GIT_REF:path/to/_manifest.json"
        )
    # a directory (a generated package) shows as a tree listing: try its manifest first
    candidates = [inner] if inner.endswith(".json") else [f"{inner.rstrip('/')}/{MANIFEST_FILE}", inner]
    error = ""
    for candidate in candidates:
        try:
            done = subprocess.run(  # noqa: S603 (git, no shell, arguments passed as a list)
                ["git", "show", f"{ref}:{candidate}"],  # noqa: S607 (git from PATH, like a user would)
                cwd=cwd,
                capture_output=True,
                check=False,
            )
        except OSError as exc:
            raise ManifestInputError(f"{spec}: cannot run git ({exc.strerror or exc})") from None
        if done.returncode == 0:
            return done.stdout, spec
        error = error or (done.stderr.decode(errors="replace").strip().splitlines() or ["failed"])[0]
    raise ManifestInputError(f"{spec}: git show failed: {error}")


def parse_manifest(raw: bytes, label: str) -> ir.Manifest:
    """A manifest from its bytes; ManifestInputError (one line, naming ``label``) if it is
    not one this akadze reads."""
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise ManifestInputError(f"{label}: not JSON ({exc})") from None
    if not isinstance(data, dict) or "format" not in data:
        raise ManifestInputError(f'{label}: not an akadze codegen manifest (no "format" key)')
    if data["format"] != ir.FORMAT:
        raise ManifestInputError(
            f"{label}: manifest format {data['format']!r} is not supported (this akadze reads format "
            f"{ir.FORMAT}); compare manifests written by the same akadze version"
        )
    try:
        return ir.decode_manifest(raw)
    except (msgspec.ValidationError, ValueError) as exc:
        raise ManifestInputError(f"{label}: not a valid manifest ({exc})") from None


# -- the comparison ---------------------------------------------------------------------------


def diff(old: ir.Manifest, new: ir.Manifest) -> list[Change]:
    """Every change from ``old`` to ``new``, with verdicts for old producers and deploy orders."""
    forward = _Differ(old, new).tasks()
    backward = {(c.where, c.topic) for c in _Differ(new, old).tasks() if c.verdict == "breaking"}
    ordered = []
    for change in forward:
        if change.order != "any order":  # decided already (renames, wire names)
            ordered.append(change)
            continue
        reverse_breaks = (change.where, change.topic) in backward
        what = change.what
        if change.verdict == "breaking":
            order: Order = "in steps" if reverse_breaks else "producers first"
            if not reverse_breaks and what.startswith("type changed: "):
                what = "type narrowed: " + what.removeprefix("type changed: ")
        else:
            order = "worker first" if reverse_breaks else "any order"
        ordered.append(Change(change.verdict, change.where, what, order, change.topic))
    return ordered


def advice(changes: Sequence[Change]) -> str:
    """The deploy-order advice for a set of changes."""
    if not changes:
        return "No changes: producers built against the old manifest are current."
    orders = {c.order for c in changes} - {"any order"}
    if "in steps" in orders or {"worker first", "producers first"} <= orders:
        return (
            "Deploy order: no single order is safe; ship it in steps. (1) Expand: make the worker "
            "accept both old and new jobs (new parameters and fields optional, removed ones kept "
            "as optional, a renamed task registered under both names, both queues served) and "
            "deploy it. (2) Regenerate the clients and deploy every producer (check with "
            "`akadze codegen verify`). (3) Contract: make the final change and deploy the worker."
        )
    if orders == {"producers first"}:
        return (
            "Deploy order: regenerate the clients and deploy every producer first, then deploy "
            "the worker (old producers' jobs still queued when it starts may fail)."
        )
    if orders == {"worker first"}:
        return "Deploy order: deploy the worker first, then regenerate the clients and deploy the producers."
    return "Deploy order: any; regenerate the clients when convenient."


class _Differ:
    """Tasks and their parameters; the types below them by :class:`TypeComparison`."""

    def __init__(self, old: ir.Manifest, new: ir.Manifest) -> None:
        self.old, self.new = old, new
        self.types = TypeComparison(old, new)

    def tasks(self) -> list[Change]:
        old = {t.name: t for t in self.old.tasks}
        new = {t.name: t for t in self.new.tasks}
        changes: list[Change] = []
        added = [n for n in sorted(new) if n not in old]
        for name in sorted(old):
            if name in new:
                changes.extend(self.task(old[name], new[name]))
                continue
            renamed = next((a for a in added if self._same_args(old[name], new[a])), None)
            if renamed is not None:
                added.remove(renamed)
                changes.append(
                    Change("breaking", name, f"task renamed to {renamed!r}", "in steps", topic="task")
                )
            else:
                changes.append(Change("breaking", name, "task removed", topic="task"))
        changes.extend(
            Change("safe", name, f"new task (queue {new[name].queue!r})", topic="task") for name in added
        )
        return changes

    def _same_args(self, old: ir.TaskSignature, new: ir.TaskSignature) -> bool:
        return old.args_fp == new.args_fp and not self.params(old.name, old.params, new.params)

    def task(self, old: ir.TaskSignature, new: ir.TaskSignature) -> list[Change]:
        changes: list[Change] = []
        if old.queue != new.queue:
            changes.append(
                Change("breaking", old.name, f"queue changed: {old.queue!r} -> {new.queue!r}", topic="queue")
            )
        for option in ("priority", "max_attempts"):
            before, after = getattr(old, option), getattr(new, option)
            if before != after:
                text = f"{option} {before} -> {after} (clients insert the value they were generated with)"
                changes.append(Change("safe", old.name, text, topic=option))
        if old.unique != new.unique:
            # clients of the old manifest compute the old key: until they are regenerated, a
            # producer and the worker side may each make a job where one was meant
            text = "unique changed (clients compute the key they were generated with: regenerate them)"
            changes.append(Change("breaking", old.name, text, topic="unique"))
        changes.extend(self.returns(old, new))
        params = self.params(old.name, old.params, new.params)
        changes.extend(params)
        if not params and old.args_fp != new.args_fp:
            text = f"argument fingerprint {old.args_fp} -> {new.args_fp} with no difference in the manifest"
            changes.append(Change("safe", old.name, text, topic="fingerprint"))
        return changes

    def returns(self, old: ir.TaskSignature, new: ir.TaskSignature) -> list[Change]:
        """A changed return type, for producers that read results (``result_of``): breaking when
        results of the new type may not decode as the old one (the comparison run from the
        worker's side: it now sends what producers take)."""
        if old.returns is None or new.returns is None or old.returns == new.returns:
            if old.result_fp and new.result_fp and old.result_fp != new.result_fp:
                text = f"result fingerprint {old.result_fp} -> {new.result_fp}"
                return [Change("safe", f"{old.name} -> result", text, topic="result")]
            return []
        found = TypeComparison(self.new, self.old).compare(new.returns, old.returns, f"{old.name}(->)", "->")
        before, after = describe(old.returns), describe(new.returns)
        if any(c.verdict == "breaking" for c in found):
            text = f"return type changed: {before} -> {after} (producers' result_of decodes the old type)"
            return [Change("breaking", f"{old.name} -> result", text, topic="result")]
        return [
            Change(
                "safe", f"{old.name} -> result", f"return type widened: {before} -> {after}", topic="result"
            )
        ]

    def params(self, task: str, old: Sequence[ir.Param], new: Sequence[ir.Param]) -> list[Change]:
        changes: list[Change] = []
        before = {p.name: p for p in old}
        after = {p.name: p for p in new}
        for name, p in before.items():
            where = f"{task}({name})"
            q = after.get(name)
            if q is None:
                changes.append(
                    Change(
                        "breaking", where, "parameter removed (old producers still send it)", topic="param"
                    )
                )
                continue
            changes.extend(requirement_changed(where, "parameter", p, q))
            changes.extend(self.types.compare(p.type, q.type, where, name))
        for name, q in after.items():
            if name not in before:
                kind = "required" if q.required else "optional"
                verdict: Verdict = "breaking" if q.required else "safe"
                text = f"new {kind} parameter ({describe(q.type)})"
                changes.append(Change(verdict, f"{task}({name})", text, topic="param"))
        return changes


# -- the command ------------------------------------------------------------------------------


def run_diff(against: str, app_path: str | None, manifest: str | None, *, allow_breaking: bool) -> int:
    """``akadze codegen diff``: print the changes and the advice; returns the exit code
    (0 nothing breaking, 1 breaking without ``allow_breaking``, 2 bad input)."""
    import sys

    from akadze_codegen import load_manifest
    from akadze_codegen.problems import CodegenError, render_problems

    if (app_path is None) == (manifest is None):
        print("error: give the new side as APP (module:attr) or --manifest FILE, not both", file=sys.stderr)
        return 2
    try:
        old = read_manifest(against)
        new = read_manifest(manifest) if manifest is not None else load_manifest(app_path)
    except ManifestInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except CodegenError as exc:
        print(render_problems(exc.problems), file=sys.stderr)
        return 2
    changes = diff(old, new)
    width = max((len(c.where) for c in changes), default=0)
    for change in changes:
        print(change.render(width))
    breaking = sum(c.verdict == "breaking" for c in changes)
    if changes:
        safe = len(changes) - breaking
        print(f"akadze codegen diff: {breaking} breaking, {safe} safe change{'s' if safe != 1 else ''}")
    print(advice(changes))
    if breaking and not allow_breaking:
        print("Exit 1: breaking changes (pass --allow-breaking to accept them).", file=sys.stderr)
        return 1
    return 0
