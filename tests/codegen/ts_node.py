"""Node for the TypeScript client tests: the pinned npm packages (examples/node_producer, npm ci),
building a generated package with tsc, and a harness process that answers JSON lines.

The tests skip when node or the npm packages are missing, except where AKADZE_REQUIRE_NODE is
set (.ci/run sets it): there a missing Node fails them, so a green run means they ran.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from akadze_codegen import render_files
from akadze_codegen.discover import build_manifest, load_app
from akadze_codegen.signature import Manifest
from akadze_codegen.write import write
from tests.support import ROOT

NODE_PROJECT = ROOT / "examples" / "node_producer"
NODE_MODULES = NODE_PROJECT / "node_modules"
TSC = NODE_MODULES / "typescript" / "bin" / "tsc"
HARNESS = Path(__file__).parent / "ts" / "harness.js"


def require_node() -> str:
    """The node binary; skips (or fails under AKADZE_REQUIRE_NODE) when Node or the packages
    are missing."""
    node = shutil.which("node")
    missing = node is None or not TSC.is_file() or not (NODE_MODULES / "pg").is_dir()
    if missing:
        message = "node and the npm packages are needed: cd examples/node_producer && npm ci"
        if os.environ.get("AKADZE_REQUIRE_NODE"):
            pytest.fail(message)
        pytest.skip(message)
    assert node is not None
    return node


def manifest_of(app_path: str) -> Manifest:
    """The manifest of a test app, discovered in this process."""
    return build_manifest(load_app(app_path), app_path)


def generate(manifest: Manifest, out: Path) -> Path:
    """The TypeScript package of ``manifest`` in ``out``, with the pinned node_modules linked in."""
    write(out, render_files(out, manifest, "typescript"))
    link = out / "node_modules"
    if not link.exists():
        link.symlink_to(NODE_MODULES, target_is_directory=True)
    return out


def tsc(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``tsc`` run in ``folder`` (its tsconfig.json unless ``args`` say otherwise)."""
    node = require_node()
    return subprocess.run(
        [node, str(TSC), *args], cwd=folder, capture_output=True, text=True, timeout=600, check=False
    )


def build(folder: Path) -> Path:
    """Compile a generated package to ``dist``; returns the dist folder."""
    done = tsc(folder, "-p", "tsconfig.json")
    assert done.returncode == 0, done.stdout + done.stderr
    return folder / "dist"


class Harness:
    """tests/codegen/ts/harness.js over one built package: one JSON request, one JSON answer."""

    def __init__(
        self, dist: Path, database_url: str | None = None, env: dict[str, str] | None = None
    ) -> None:
        node = require_node()
        args = [node, str(HARNESS), str(dist)] + ([database_url] if database_url else [])
        env = {**os.environ, "NODE_PATH": str(NODE_MODULES), **(env or {})}
        self.process = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        """Send one request; its answer."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, "the node harness exited"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        """End the process (its pool closes first)."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)
        if self.process.stdout is not None:
            self.process.stdout.close()


def both_clients(app_path: str, root: Path, ts_name: str, py_name: str) -> Iterator[tuple[Path, Any]]:
    """For a module fixture: (the built TypeScript package's dist, the imported Python client
    package) of the app's manifest, generated under ``root``; the Python package is importable
    until the fixture ends."""
    require_node()
    manifest = manifest_of(app_path)
    dist = build(generate(manifest, root / "ts" / ts_name))
    python_out = root / "py" / py_name
    write(python_out, render_files(python_out, manifest))
    sys.path.insert(0, str(python_out.parent))
    try:
        yield dist, importlib.import_module(py_name)
    finally:
        sys.path.remove(str(python_out.parent))
        for name in [m for m in sys.modules if m == py_name or m.startswith(py_name + ".")]:
            sys.modules.pop(name, None)


def libpq_url(database_url: str) -> str:
    """A SQLAlchemy URL as node-postgres takes it."""
    return database_url.replace("postgresql+asyncpg://", "postgresql://")
