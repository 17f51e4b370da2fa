"""``akadze codegen APP --out DIR [--check] [--from-manifest FILE]``: messages and exit codes.

0: written, or (with --check) current. 1: --check found stale, missing, orphan or hand-edited
files (each with a unified diff). 2: the app cannot be imported, a type is unsupported, the
options are wrong: every problem is listed, each with a fix.
"""

from __future__ import annotations

import sys
from pathlib import Path

from akadze_codegen import check as _check, generate as _generate
from akadze_codegen.problems import CodegenError, render_problems
from akadze_codegen.write import Mismatch


def run_codegen(app_path: str | None, out: Path, check: bool, from_manifest: Path | None) -> int:
    """Run codegen as the ``akadze codegen`` command does; returns the exit code."""
    try:
        if check:
            return _report(app_path, out, _check(app_path, out, from_manifest=from_manifest))
        written = _generate(app_path, out, from_manifest=from_manifest)
    except CodegenError as exc:
        print(render_problems(exc.problems), file=sys.stderr)
        return 2
    if written:
        print(f"akadze codegen: wrote {len(written)} file(s) to {out}")
    else:
        print(f"akadze codegen: {out} is up to date")
    return 0


def _report(app_path: str | None, out: Path, mismatches: list[Mismatch]) -> int:
    if not mismatches:
        return 0
    counts: dict[str, int] = {}
    for m in mismatches:
        counts[m.reason] = counts.get(m.reason, 0) + 1
    summary = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
    for m in mismatches:
        print(f"--- {m.path}: {m.reason}")
        print(m.diff, end="")
    command = f"akadze codegen {app_path or '--from-manifest ...'} --out {out}"
    print(f"{out} is out of date ({summary}). Run `{command}` and commit the result.")
    return 1
