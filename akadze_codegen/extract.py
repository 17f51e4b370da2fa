"""``python -m akadze_codegen.extract module:attr``: import the worker app, print its manifest.

Discovery runs in this separate process, in the worker's environment, with
``AKADZE_CODEGEN=1`` and a fixed ``PYTHONHASHSEED``: the generator's own process never imports
worker code. Output on stdout is one JSON object, ``{"manifest": ...}`` (exit 0),
``{"problems": [...]}`` or ``{"error": "..."}`` (an app path that names nothing loadable; exit
2); anything the app prints while importing goes to stderr.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import msgspec

from akadze.app_path import split_app_path
from akadze.errors import AppLoadError
from akadze_codegen.problems import CodegenError, CodegenProblem
from akadze_codegen.signature import Manifest

#: seconds the app's import and the walk may take
DEFAULT_TIMEOUT_S = 120.0


class Result(msgspec.Struct, omit_defaults=True):
    """What the discovery subprocess prints: the manifest, the problems, or a load error."""

    manifest: Manifest | None = None
    problems: list[CodegenProblem] = []
    #: the app path names nothing loadable (akadze.app_path's one-line message)
    error: str | None = None


def main(argv: list[str]) -> int:
    """The discovery subprocess's entry point; prints one Result as JSON, returns the exit code."""
    if len(argv) != 2:
        sys.stderr.write("usage: python -m akadze_codegen.extract module:attr\n")
        return 2
    stdout = sys.stdout
    sys.stdout = sys.stderr  # the app's own prints must not corrupt the JSON
    try:
        from akadze_codegen.discover import extract

        result = Result(manifest=extract(argv[1]))
    except CodegenError as exc:
        result = Result(problems=exc.problems)
    except AppLoadError as exc:
        result = Result(error=str(exc))
    finally:
        sys.stdout = stdout
    stdout.buffer.write(msgspec.json.encode(result) + b"\n")
    stdout.flush()
    return 0 if result.manifest is not None else 2


def run_extract(app_path: str, *, cwd: Path | None = None, timeout_s: float | None = None) -> Manifest:
    """Run discovery in a subprocess; CodegenError with every problem if it fails, AppLoadError
    when the app path names nothing loadable."""
    split_app_path(app_path)
    workdir = (cwd or Path.cwd()).resolve()
    env = dict(os.environ)
    env["AKADZE_CODEGEN"] = "1"
    env["PYTHONHASHSEED"] = "0"
    env["PYTHONPATH"] = os.pathsep.join(
        [str(workdir), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    )
    timeout = timeout_s or float(os.environ.get("AKADZE_CODEGEN_TIMEOUT", DEFAULT_TIMEOUT_S))
    try:
        done = subprocess.run(  # noqa: S603 (our own interpreter and module, no shell)
            [sys.executable, "-m", "akadze_codegen.extract", app_path],
            cwd=workdir,
            env=env,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise CodegenError(
            [
                CodegenProblem(
                    app_path,
                    f"importing the app took longer than {timeout:g} s",
                    "make the app's modules import without waiting on anything "
                    "(or raise AKADZE_CODEGEN_TIMEOUT)",
                )
            ]
        ) from None
    try:
        result = msgspec.json.decode(done.stdout, type=Result)
    except msgspec.DecodeError:
        tail = "\n".join(done.stderr.decode(errors="replace").strip().splitlines()[-12:])
        raise CodegenError(
            [CodegenProblem(app_path, f"discovery failed (exit {done.returncode}):\n{tail}")]
        ) from None
    if result.error is not None:
        raise AppLoadError(app_path, result.error)
    if result.manifest is None:
        raise CodegenError(result.problems or [CodegenProblem(app_path, "discovery failed")])
    return result.manifest


if __name__ == "__main__":
    sys.exit(main(sys.argv))
