"""Hard case 34: other Python minor versions generate the same bytes as this one (and case 28's
PEP 695 ``type`` aliases, which need 3.12, mirror as their ``TypeAliasType`` spelling does).

For each other CPython 3.11+ interpreter found (``python3.12``, ``python3.13``, ... on PATH or
under pyenv, or those listed in ``AKADZE_TEST_PYTHONS``, separated by ``os.pathsep``; set it
to ``none`` to skip), a venv holding the same versions of akadze's dependencies as this
interpreter's is made once and kept in ``.venv-codegen-py3.X/`` at the checkout's root
(gitignored; about 15 s the first time, from the package index pip is configured with). Every
golden package and the example's clients are then generated there (discovery and rendering,
with a random hash seed) and compared byte for byte with the checked-in ones: about 2 s per
interpreter. Skipped when no other interpreter is found, or when the venv cannot be built
(offline).
"""

from __future__ import annotations

import glob
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.codegen.checkers import ROOT

#: akadze's dependencies and theirs that discovery and rendering import, pinned to this venv's
PINNED = (
    "annotated-types",
    "asyncpg",
    "cronsim",
    "greenlet",
    "libcst",
    "msgspec",
    "platformdirs",
    "pydantic",
    "pydantic-core",
    "pyyaml",
    "sqlalchemy",
    "typer",
    "typing-extensions",
    "typing-inspection",
)


def _version(python: str) -> tuple[int, int] | None:
    """The interpreter's version: from its path when that names it (``python3.12``,
    ``versions/3.12.1/``), which costs nothing at collection, else by asking it."""
    match = re.search(r"python(3)\.(\d+)$", python) or re.search(r"/(3)\.(\d+)[.\d]*/bin/python3?$", python)
    if match:
        return int(match.group(1)), int(match.group(2))
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print(*sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    major, minor = done.stdout.split()
    return int(major), int(minor)


def other_pythons() -> dict[str, str]:
    """``"3.12"`` -> an interpreter of that version, for every 3.11+ minor version but ours."""
    listed = os.environ.get("AKADZE_TEST_PYTHONS")
    if listed:
        candidates = [p for p in listed.split(os.pathsep) if p]
    else:
        pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
        # pyenv's own interpreters first: its shims on PATH fail outside a directory whose
        # pyenv version names them ("command not found ... exists in these Python versions")
        candidates = sorted(glob.glob(str(pyenv / "versions" / "3.*" / "bin" / "python3")))
        candidates += [shutil.which(f"python3.{minor}") or "" for minor in range(11, 20)]
    found: dict[str, str] = {}
    for python in filter(None, candidates):
        version = _version(python)
        if version is None or version < (3, 11) or version == sys.version_info[:2]:
            continue
        found.setdefault(f"{version[0]}.{version[1]}", python)
    return dict(sorted(found.items()))


def _pins() -> list[str]:
    pins = []
    for name in PINNED:
        try:
            pins.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return pins


def venv_for(version: str, python: str) -> Path:
    """A venv of ``python`` with this venv's pins, built once (atomically) and reused."""
    pins = _pins()
    stamp = "\n".join(pins) + "\n"
    final = ROOT / f".venv-codegen-py{version}"
    if (final / "pins.txt").is_file() and (final / "pins.txt").read_text() == stamp:
        return final
    building = ROOT / f".venv-codegen-py{version}.{os.getpid()}.tmp"
    shutil.rmtree(building, ignore_errors=True)
    try:
        subprocess.run([python, "-m", "venv", str(building)], capture_output=True, timeout=120, check=True)
        subprocess.run(
            [str(building / "bin" / "python"), "-m", "pip", "install", "--quiet", *pins],
            capture_output=True,
            timeout=300,
            check=True,
        )
    except subprocess.CalledProcessError as exc:
        shutil.rmtree(building, ignore_errors=True)
        tail = "\n".join((exc.stderr or b"").decode(errors="replace").strip().splitlines()[-3:])
        pytest.skip(f"cannot build a Python {version} venv with {' '.join(pins)}: {tail}")
    (building / "pins.txt").write_text(stamp)
    shutil.rmtree(final, ignore_errors=True)
    try:
        building.rename(final)
    except OSError:  # another run finished first: use its venv
        shutil.rmtree(building, ignore_errors=True)
    return final


PEP_695_APP = """
from akadze import Akadze

type Scores = dict[str, float]
type Pair[T] = tuple[T, T]
type Flipped[K, V] = dict[V, list[K]]
type MaybePair[T] = Pair[T] | None

app = Akadze(database_url="postgresql://localhost/never-connected")


@app.task("aliases.use")
async def use(scores: Scores, pair: Pair[int], flipped: Flipped[int, str], maybe: MaybePair[str]) -> None:
    return None
"""

#: run by the other interpreter from the checkout: what differs from the checked-in packages,
#: and (from 3.12) the parameters of PEP_695_APP, in the directory given as argv[1]
RUN = """
import json, sys
import msgspec
from akadze_codegen.discover import build_manifest, load_app
from akadze_codegen.emit import render
from akadze_codegen.write import compare
from tests.codegen.checkers import GOLDEN, PRODUCER
from tests.codegen.regen import CASES

targets = {**{GOLDEN / case: path for case, path in CASES.items()},
           PRODUCER / "clients": "examples.worker_app:app"}
found = {}
for folder, app_path in targets.items():
    files = render(build_manifest(load_app(app_path), app_path))
    found[folder.name] = [f"{m.path.name}: {m.reason}\\n{m.diff}" for m in compare(folder, files)]
pep_695 = None
if sys.version_info >= (3, 12):
    sys.path.insert(0, sys.argv[1])
    (task,) = build_manifest(load_app("cg_pep695_app:app"), "cg_pep695_app:app").tasks
    pep_695 = msgspec.json.encode(task.params).decode()
print(json.dumps({"version": list(sys.version_info[:2]), "mismatches": found, "pep_695": pep_695}))
"""

PYTHONS = other_pythons()
VERSIONS = sorted(PYTHONS) or [
    pytest.param("none", marks=pytest.mark.skip(reason="no other Python 3.11+ found"))
]


@pytest.fixture(scope="module", params=VERSIONS)
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run of RUN under another Python (its venv built on first use)."""
    version: str = request.param
    venv = venv_for(version, PYTHONS[version])
    scratch = tmp_path_factory.mktemp(f"py{version}")
    (scratch / "cg_pep695_app.py").write_text(PEP_695_APP)
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", RUN, str(scratch)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "random"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["version"] == [int(part) for part in version.split(".")]
    return result


def test_another_python_minor_version_generates_the_same_bytes(run: dict[str, Any]) -> None:
    assert run["mismatches"] == {"registration": [], "wire": [], "long_names": [], "clients": []}


def test_pep_695_type_aliases_mirror_as_their_typing_extensions_spelling(run: dict[str, Any]) -> None:
    """Case 28: ``type X = ...`` (Python 3.12+) gives what the ``TypeAliasType(...)`` spelling
    of test_codegen_aliases.py gives here."""
    if run["pep_695"] is None:
        pytest.skip("the type statement needs Python 3.12")
    import msgspec

    from akadze_codegen.discover import build_manifest
    from tests.codegen.test_codegen_aliases import app_with_aliases

    (task,) = build_manifest(app_with_aliases(), "test:app").tasks
    assert run["pep_695"] == msgspec.json.encode(task.params).decode()
