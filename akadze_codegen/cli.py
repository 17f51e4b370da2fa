"""``akadze codegen``: the command group codegen owns (mounted by akadze.cli), and the messages
and exit codes of generation.

``akadze codegen APP --out DIR [--check] [--from-manifest FILE]`` is short for ``akadze codegen
generate APP ...``. 0: written, or (with --check) current. 1: --check found stale, missing,
orphan or hand-edited files (each with a unified diff). 2: the app cannot be loaded (one line),
a type is unsupported, the options are wrong: every problem is listed, each with a fix.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from akadze_codegen.problems import CodegenError, render_problems

if TYPE_CHECKING:
    from akadze_codegen.write import Mismatch


class _CodegenGroup(TyperGroup):
    """A first word that names no subcommand (an app path, or an option of ``generate``) runs
    ``generate`` with every word: ``codegen APP --out DIR`` is ``codegen generate APP --out DIR``.

    Click parses as it always does; this is its hook for finding the command (the one click's
    documentation uses for aliases), so ``diff`` and ``verify`` still sit beside ``generate``.
    """

    # Any: typer's own copy of click types ctx and the command, and it does not export them
    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        if args and args[0] not in self.commands:
            return "generate", self.commands["generate"], args
        return super().resolve_command(ctx, args)


app = typer.Typer(
    cls=_CodegenGroup,
    help="Typed client packages for producer services: write them (akadze codegen APP --out DIR, "
    "short for codegen generate), diff manifests, verify stubs.",
    no_args_is_help=True,
    # words meant for generate (codegen --out DIR --from-manifest F) reach resolve_command
    context_settings={"ignore_unknown_options": True},
)


def _handled(fn: Callable[..., int]) -> Callable[..., None]:
    """akadze.cli's one place for exit codes (imported when a command runs, because akadze.cli
    imports this module to mount the group), and the command's returned code as its exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        from akadze.cli.common import handled

        code = handled(fn)(*args, **kwargs)
        if code:
            raise typer.Exit(code)

    return wrapper


def _usage(message: str) -> None:
    from akadze.cli.common import fail

    fail(2, f"error: {message}")


AppOption = Annotated[
    str | None, typer.Option("--app", help="The worker app as module:attr (or AKADZE_APP).")
]


@app.command("generate")
@_handled
def generate(
    app_path: Annotated[
        str | None, typer.Argument(metavar="APP", help="module:attr of the app (or --app, or AKADZE_APP)")
    ] = None,
    app_option: AppOption = None,
    out: Annotated[Path, typer.Option("--out", help="The package directory to write.")] = Path("clients"),
    check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 when stale.")] = False,
    from_manifest: Annotated[
        Path | None,
        typer.Option("--from-manifest", help="Render from a manifest, importing no worker code."),
    ] = None,
    lang: Annotated[
        str, typer.Option("--lang", help="python (a Python package) or typescript (an npm package).")
    ] = "python",
) -> int:
    """Write the typed clients of APP to DIR (also: akadze codegen APP --out DIR)."""
    from akadze.app_path import choose_app_path

    path = choose_app_path(app_path, app_option)
    if path is None and from_manifest is None:
        _usage("name the app (module:attr, --app or AKADZE_APP) or pass --from-manifest")
    return run_codegen(path, out, check, from_manifest, lang)


@app.command("diff")
@_handled
def diff(
    app_path: Annotated[
        str | None, typer.Argument(metavar="APP", help="module:attr of the worker app (the new side)")
    ] = None,
    app_option: AppOption = None,
    against: Annotated[
        str,
        typer.Option(
            "--against",
            help="The old manifest: a file, a generated package directory, or GIT_REF:path (git show).",
        ),
    ] = "",
    manifest: Annotated[
        str | None,
        typer.Option("--manifest", help="The new manifest (file or package directory) instead of APP."),
    ] = None,
    allow_breaking: Annotated[
        bool, typer.Option("--allow-breaking", help="Exit 0 even when a change is breaking.")
    ] = False,
) -> int:
    """Classify the changes between two manifests for producers already deployed.

    Exit 0: nothing breaking; 1: a breaking change (unless --allow-breaking).

    Exit 2: a manifest cannot be read, or the app cannot be imported.
    """
    from akadze.app_path import choose_app_path
    from akadze_codegen.diff import run_diff

    if not against:
        _usage("pass --against OLD (a manifest file, a package directory or GIT_REF:path)")
    path = choose_app_path(app_path, app_option) if manifest is None else app_path or app_option
    return run_diff(against, path, manifest, allow_breaking=allow_breaking)


@app.command("verify")
@_handled
def verify(
    package: Annotated[
        str | None,
        typer.Option("--package", help="A generated package directory (its _manifest.json is read)."),
    ] = None,
    manifest: Annotated[str | None, typer.Option("--manifest", help="A manifest file instead.")] = None,
    dsn: Annotated[
        str | None,
        typer.Option("--dsn", "--database-url", help="The workers' database (or AKADZE_DATABASE_URL)."),
    ] = None,
    allow_unconsumed: Annotated[
        bool,
        typer.Option("--allow-unconsumed", help="Exit 0 even when no live worker consumes a stub's queue."),
    ] = False,
) -> int:
    """Check every stub's task, queue and argument fingerprint against the live workers.

    Exit 0: every stub matches a live worker.

    Exit 1: a fingerprint or queue differs, or a task is not run.

    Exit 1 also when no live worker consumes a stub's queue, unless --allow-unconsumed.

    Exit 2: the manifest cannot be read, or the database cannot be reached.
    """
    from akadze_codegen.verify import run_verify

    if (package is None) == (manifest is None):
        _usage("pass --package DIR (a generated package) or --manifest FILE")
    url = dsn or os.environ.get("AKADZE_DATABASE_URL")
    if not url:
        _usage("no database configured: pass --dsn URL or set AKADZE_DATABASE_URL")
    source = package if package is not None else manifest
    assert source is not None
    assert url is not None
    return run_verify(url, source, allow_unconsumed=allow_unconsumed)


def run_codegen(
    app_path: str | None, out: Path, check: bool, from_manifest: Path | None, lang: str = "python"
) -> int:
    """Run codegen as the ``akadze codegen`` command does; returns the exit code."""
    from akadze_codegen import check as check_files, generate as generate_files

    try:
        if check:
            mismatches = check_files(app_path, out, from_manifest=from_manifest, lang=lang)
            return _report(app_path, out, mismatches, lang)
        written = generate_files(app_path, out, from_manifest=from_manifest, lang=lang)
    except CodegenError as exc:
        print(render_problems(exc.problems), file=sys.stderr)
        return 2
    except Exception as exc:
        # akadze (and with it pydantic) is imported only when an app is: rendering from a
        # manifest must not import it, so the class is looked up once one was raised
        from akadze.errors import AppLoadError

        if not isinstance(exc, AppLoadError):
            raise
        print(f"error: {exc}", file=sys.stderr)  # the app path names nothing loadable
        return 2
    if written:
        print(f"akadze codegen: wrote {len(written)} file(s) to {out}")
    else:
        print(f"akadze codegen: {out} is up to date")
    return 0


def _report(app_path: str | None, out: Path, mismatches: list[Mismatch], lang: str = "python") -> int:
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
    if lang != "python":
        command += f" --lang {lang}"
    print(f"{out} is out of date ({summary}). Run `{command}` and commit the result.")
    return 1
