"""akadze codegen: typed producer clients for the tasks of a worker app.

Pipeline: discover (import the app in a subprocess, walk the types) -> Manifest -> emit
(libcst, deterministic bytes) -> write or compare. ``generate`` and ``check`` share every
step up to the last one. Imports are deferred so that ``python -m akadze_codegen.extract``
(the discovery subprocess) loads neither libcst nor the emitter.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from akadze_codegen.problems import CodegenError, CodegenProblem

if TYPE_CHECKING:
    from akadze_codegen.signature import Manifest
    from akadze_codegen.write import GeneratedFile, Mismatch

__all__ = ["CodegenError", "CodegenProblem", "check", "generate", "load_manifest", "render_files"]


def load_manifest(app_path: str | None, from_manifest: Path | None = None) -> Manifest:
    """The manifest from a file (no worker import) or from the app (in a subprocess)."""
    from akadze_codegen.signature import decode_manifest

    if from_manifest is not None:
        try:
            return decode_manifest(from_manifest.read_bytes())
        except (OSError, ValueError) as exc:
            raise CodegenError(
                [CodegenProblem(str(from_manifest), f"cannot read the manifest: {exc}")]
            ) from None
    if not app_path:
        raise CodegenError([CodegenProblem("akadze codegen", "no app given", "pass APP as module:attr")])
    from akadze_codegen.extract import run_extract

    return run_extract(app_path)


#: the languages ``--lang`` takes
LANGUAGES = ("python", "typescript")


def render_files(out: Path, manifest: Manifest, lang: str = "python") -> dict[str, bytes]:
    """The package's files in memory; the package is named after ``out``'s last component
    (a Python package, or with ``lang="typescript"`` an npm package)."""
    package = out.resolve().name
    if lang == "typescript":
        from akadze_codegen.ts.emit import render_typescript

        if not package or package.startswith(("_", ".")):
            raise CodegenError(
                [CodegenProblem(str(out), f"{package!r} cannot name an npm package", "choose another --out")]
            )
        return render_typescript(manifest, package)
    if lang != "python":
        raise CodegenError(
            [CodegenProblem("--lang", f"unknown language {lang!r}", f"use one of {', '.join(LANGUAGES)}")]
        )
    from akadze_codegen.emit import render

    if not package.isidentifier() or package.startswith("_"):
        raise CodegenError(
            [
                CodegenProblem(
                    str(out),
                    f"{package!r} cannot be a package name",
                    "the last component of --out must be a Python identifier",
                )
            ]
        )
    return render(manifest)


def generate(
    app_path: str | None, out: Path, *, from_manifest: Path | None = None, lang: str = "python"
) -> list[GeneratedFile]:
    """Write the package to ``out``; returns the files written (unchanged ones are not)."""
    from akadze_codegen.write import GeneratedFile, write

    files = render_files(out, load_manifest(app_path, from_manifest), lang)
    written, _ = write(out, files)
    return [GeneratedFile(path, path.read_bytes()) for path in written]


def check(
    app_path: str | None, out: Path, *, from_manifest: Path | None = None, lang: str = "python"
) -> list[Mismatch]:
    """What differs between ``out`` and a fresh generation; writes nothing."""
    from akadze_codegen.write import compare

    files = render_files(out, load_manifest(app_path, from_manifest), lang)
    return compare(out, files)
