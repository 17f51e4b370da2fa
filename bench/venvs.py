"""Build and reuse the bench's venvs under bench/.venvs/<name> from pinned requirement files."""

from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench.peers import BENCH_DIR

VENVS_DIR = BENCH_DIR / ".venvs"


class VenvError(RuntimeError):
    pass


def _version_of(python: str) -> tuple[int, int, int] | None:
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:3])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
        return (int(out[0]), int(out[1]), int(out[2]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def find_base_python(explicit: str | None = None) -> tuple[str, tuple[int, int, int]]:
    """The interpreter the peer venvs are built from: Python 3.12 if there is one.

    oban needs 3.12 or newer; the peer anchors in notes/perf-peers.md used 3.12 for all peers.
    Order: --peer-python / BENCH_PYTHON, python3.12 and python3.13 on PATH, pyenv's 3.12.x and
    3.13.x, then the interpreter running the bench.
    """
    candidates: list[str] = []
    for given in (explicit, os.environ.get("BENCH_PYTHON")):
        if given:
            candidates.append(given)
    for name in ("python3.12", "python3.13"):
        found = shutil.which(name)
        if found:
            candidates.append(found)
    pyenv_root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    for minor in ("3.12", "3.13"):
        candidates += sorted(glob.glob(f"{pyenv_root}/versions/{minor}.*/bin/python3"))
    candidates.append(sys.executable)
    for python in candidates:
        version = _version_of(python)
        if version is not None:
            return python, version
    raise VenvError("no usable Python interpreter found for the peer venvs")


def ensure_venv(name: str, requirements: Path, base_python: str, log) -> str:
    """Return the venv's python, creating or refreshing the venv when the pins changed."""
    venv = VENVS_DIR / name
    python = venv / "bin" / "python"
    stamp = venv / ".bench-stamp"
    digest = hashlib.sha256(requirements.read_bytes() + base_python.encode()).hexdigest()
    if python.exists() and stamp.exists() and stamp.read_text() == digest:
        return str(python)
    log(f"building venv {venv.relative_to(BENCH_DIR.parent)} from {requirements.name} ...")
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    steps = [
        [base_python, "-m", "venv", str(venv)],
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            str(requirements),
        ],
    ]
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            errors = [ln for ln in proc.stderr.splitlines() if "ERROR" in ln or "error" in ln]
            detail = (errors or proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise VenvError(f"`{' '.join(cmd[-3:])}` failed: {detail}")
    stamp.write_text(digest)
    return str(python)
