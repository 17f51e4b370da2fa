"""Run mypy and pyright over generated code and typing fixtures; normalise their output.

mypy runs with tests/codegen/typecheck/mypy.ini (``--strict`` and nothing else) and a cache
under .mypy_cache/, so only the first run in a checkout pays for analysing akadze's
dependencies. pyright is optional: the tests that need it skip when it is not installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "codegen" / "golden"
TYPECHECK = ROOT / "tests" / "codegen" / "typecheck"
PRODUCER = ROOT / "examples" / "producer"
MYPY_CACHE = ROOT / ".mypy_cache" / "akadze-typecheck"

#: what one mypy run checks together: every golden package and the typing fixtures
CODEGEN_TARGETS = (
    "tests/codegen/golden/registration",
    "tests/codegen/golden/wire",
    "tests/codegen/golden/long_names",
    "tests/codegen/typecheck/negative_client.py",
    "tests/codegen/typecheck/positive_client.py",
    "examples/producer/service.py",
)


def run_mypy(*targets: str) -> str:
    """mypy's output (no summary line) for ``targets``, paths relative to the checkout."""
    env = dict(os.environ)
    env["MYPYPATH"] = os.pathsep.join(str(p) for p in (GOLDEN, ROOT, PRODUCER))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(TYPECHECK / "mypy.ini"),
            "--cache-dir",
            str(MYPY_CACHE),
            "--no-error-summary",
            "--no-pretty",
            *targets,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode not in (0, 1) or done.stderr.strip():
        raise RuntimeError(f"mypy failed ({done.returncode}):\n{done.stderr}\n{done.stdout}")
    return done.stdout


def mypy_version() -> str:
    from mypy.version import __version__

    return __version__


def pyright_available() -> bool:
    return shutil.which("pyright") is not None or _importable("pyright")


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def run_pyright(*targets: str) -> str:
    """pyright --strict's diagnostics for ``targets``, one per line, paths relative."""
    command = [shutil.which("pyright") or sys.executable]
    if command[0] == sys.executable:
        command += ["-m", "pyright"]
    done = subprocess.run(
        [
            *command,
            "--project",
            str(TYPECHECK / "pyrightconfig.json"),
            "--pythonpath",
            sys.executable,
            *targets,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode not in (0, 1):
        raise RuntimeError(f"pyright failed ({done.returncode}):\n{done.stderr}\n{done.stdout}")
    lines = []
    for line in done.stdout.splitlines():
        line = line.strip()
        if re.match(r"^\d+ errors?, ", line) or not re.search(r":\d+:\d+ - ", line):
            continue
        lines.append(line.replace(f"{ROOT}{os.sep}", ""))
    return "\n".join(lines) + ("\n" if lines else "")


def lines_for(output: str, path: str) -> list[str]:
    """The diagnostics of one file (``path`` relative to the checkout)."""
    return [line for line in output.splitlines() if line.startswith(path)]


def failing_lines(lines: list[str]) -> list[int]:
    """The line numbers with at least one error. This is what the snapshots pin: mypy words
    some errors differently, and even reports a different number of them on a line, between a
    cold and a warm cache and between versions; which lines fail does not change."""
    found = set()
    for line in lines:
        match = re.match(r"^[^:]+:(\d+):(?:\d+)?:? ?(?:- )?error: ", line)
        if match:
            found.add(int(match.group(1)))
    return sorted(found)
