"""Regenerate the golden packages after an intended change to the generated code.

    python -m tests.codegen.regen          # rewrite tests/codegen/golden/<case>/ and snapshots
    python -m tests.codegen.regen --check  # exit 1 if any golden package is stale

Each case is a worker-side fixture app under tests/codegen/apps/; its package is rendered by
the same functions as ``akadze codegen`` (discovery in-process here, for speed).
"""

from __future__ import annotations

import sys
from pathlib import Path

from akadze_codegen.discover import build_manifest, load_app
from akadze_codegen.emit import render
from akadze_codegen.write import compare, write
from tests.codegen.checkers import (
    CODEGEN_TARGETS,
    ROOT,
    TYPECHECK,
    lines_for,
    mypy_version,
    pyright_available,
    run_mypy,
    run_pyright,
)

GOLDEN = Path(__file__).resolve().parent / "golden"

#: golden case (the package name) -> the app it is generated from
CASES: dict[str, str] = {
    "registration": "tests.codegen.apps.registration.worker:app",
    "wire": "tests.codegen.apps.wire.worker:app",
    "long_names": "tests.codegen.apps.long_names.worker:app",
}


def render_case(case: str) -> dict[str, bytes]:
    app_path = CASES[case]
    return render(build_manifest(load_app(app_path), app_path))


def main(argv: list[str]) -> int:
    stale = 0
    for case in CASES:
        files = render_case(case)
        if "--check" in argv:
            mismatches = compare(GOLDEN / case, files)
            for m in mismatches:
                print(f"{m.path}: {m.reason}")
            stale += len(mismatches)
        else:
            written, removed = write(GOLDEN / case, files)
            for path in [*written, *removed]:
                print(f"updated {path.relative_to(GOLDEN.parent)}")
    if "--check" not in argv:
        write_snapshots()
    return 1 if stale else 0


#: typing fixtures whose diagnostics are pinned: file -> (snapshot stem, what mypy runs on)
SNAPSHOTS = {
    "tests/codegen/typecheck/negative_client.py": (TYPECHECK / "negative_client", CODEGEN_TARGETS),
    "tests/typing/task_enqueue.py": (
        ROOT / "tests" / "typing" / "task_enqueue",
        ("tests/typing/task_enqueue.py",),
    ),
}


def write_snapshots() -> None:
    """Pin what mypy (and pyright, when installed) say about the typing fixtures."""
    for path, (stem, targets) in SNAPSHOTS.items():
        output = "".join(f"{line}\n" for line in lines_for(run_mypy(*targets), path))
        stem.with_suffix(".mypy.txt").write_text(f"# mypy {mypy_version()}\n{output}")
        print(f"updated {stem.with_suffix('.mypy.txt').relative_to(ROOT)}")
        if pyright_available() and path.startswith("tests/codegen"):
            pyright = lines_for(
                run_pyright("tests/codegen/golden", path, path.replace("negative", "positive")), path
            )
            stem.with_suffix(".pyright.txt").write_text("".join(f"{line}\n" for line in pyright))
            print(f"updated {stem.with_suffix('.pyright.txt').relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
