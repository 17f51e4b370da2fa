"""Discovery: import the worker app, read its task registry into a Manifest.

Runs in the worker's environment (``python -m akadze_codegen.extract``), never in the
producer's. Each task's arguments come from its codec's argument TypedDict, walked by
mirror.Walker; every problem is collected, nothing stops at the first.
"""

from __future__ import annotations

import functools
import inspect
import keyword
import pathlib
import traceback
from collections.abc import Mapping
from typing import Any

import msgspec

from akadze.app import Akadze
from akadze.app_path import load_app as load_akadze_app
from akadze.errors import AppLoadError
from akadze.flow import Limit, Unique
from akadze_codegen import signature as ir
from akadze_codegen.mirror import OVERRIDE_TARGETS, Walker, rename
from akadze_codegen.naming import attr_name, check_names
from akadze_codegen.problems import CodegenError, CodegenProblem


def load_app(app_path: str) -> Akadze:
    """The app, loaded by akadze's one loader (akadze.app_path): a path that names nothing
    loadable is its AppLoadError, one line; an import that raised is a CodegenError with the
    end of its traceback and how to keep discovery from tripping on it."""
    try:
        return load_akadze_app(app_path)
    except AppLoadError as exc:
        if not exc.raised_by_app or exc.__cause__ is None:
            raise
        raise CodegenError([_import_problem(app_path, exc.__cause__)]) from None


def _import_problem(app_path: str, exc: BaseException) -> CodegenProblem:
    tail = traceback.format_exception(type(exc), exc, exc.__traceback__)
    text = "".join(tail[-4:]).rstrip()
    return CodegenProblem(
        app_path.partition(":")[0],
        f"importing the app failed:\n{text}",
        "the app's modules must import without side effects (no connection, no required "
        "setting); guard those with akadze.client.is_codegen()",
    )


def build_manifest(app: Akadze, app_path: str, overrides: Mapping[str, str] | None = None) -> ir.Manifest:
    """Read every task of ``app`` into a Manifest; CodegenError lists every problem found."""
    walker = Walker(dict(overrides or {}))
    problems = walker.problems
    clients: dict[str, str] = {}
    by_client: dict[str, str] = {}
    for module in app.included:
        client = module.rsplit(".", 1)[-1]
        if client in by_client:
            problems.append(
                CodegenProblem(
                    module,
                    f"included modules {by_client[client]!r} and {module!r} would both generate {client}.py",
                    "rename one of the modules (the client module is named after the "
                    "included module's last component)",
                )
            )
        elif client.startswith("_") or not client.isidentifier() or keyword.iskeyword(client):
            problems.append(
                CodegenProblem(
                    module,
                    f"{client!r} cannot name a generated module",
                    "rename the module: it must be an identifier that does not start with _",
                )
            )
        by_client[client] = module
        clients[module] = client
    tasks: list[ir.TaskSignature] = []
    for name in sorted(app.tasks):
        task = app.tasks[name]
        params = walker.params(task)
        tasks.append(
            ir.TaskSignature(
                name=name,
                attr=attr_name(name),
                client=clients.get(task.module) if task.module else None,
                queue=task.options.queue,
                priority=task.options.priority,
                max_attempts=task.options.max_attempts,
                args_fp=task.args_fp,
                params=params,
                module=task.module,
                doc=_first_line(task_doc(task.fn)),
                unique=_unique_spec(task.options.unique),
                limit=_limit_spec(task.options.limit),
                returns=walker.walk(task.result_type.annotation, f"{name} (its return type)"),
                result_fp=task.result_type.fingerprint,
            )
        )
    problems.extend(check_names(tasks, by_client))
    if problems:
        raise CodegenError(problems)
    definitions = walker.finish()
    renamed = walker.renames
    tasks = [
        msgspec.structs.replace(
            t,
            params=[msgspec.structs.replace(p, type=rename(p.type, renamed)) for p in t.params],
            returns=None if t.returns is None else rename(t.returns, renamed),
        )
        for t in tasks
    ]
    modules = [ir.ClientModule(module, client) for module, client in clients.items()]
    return ir.Manifest(
        format=ir.FORMAT,
        app=app_path,
        modules=sorted(modules, key=lambda m: m.client),
        tasks=tasks,
        types=definitions,
    )


def task_doc(fn: Any) -> str | None:
    """The docstring of what runs: a partial's function, a callable instance's ``__call__``
    (else its class's), never the docs of ``functools.partial`` itself."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)) and callable(fn) and not inspect.isclass(fn):
        return inspect.getdoc(type(fn).__call__) or inspect.getdoc(type(fn))
    return inspect.getdoc(fn)


def _first_line(doc: str | None) -> str | None:
    if not doc:
        return None
    return doc.strip().splitlines()[0].strip() or None


def load_overrides(start: pathlib.Path | None = None) -> dict[str, str]:
    """``[tool.akadze.codegen.type_overrides]`` from the nearest pyproject.toml, if any."""
    import tomllib

    here = (start or pathlib.Path.cwd()).resolve()
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            data = tomllib.loads(candidate.read_text(encoding="utf-8"))
            table = data.get("tool", {}).get("akadze", {}).get("codegen", {})
            overrides = table.get("type_overrides", {})
            bad = {k: v for k, v in overrides.items() if v not in OVERRIDE_TARGETS}
            if bad:
                raise CodegenError(
                    [
                        CodegenProblem(
                            f"{candidate}: type_overrides[{key!r}]",
                            f"{value!r} is not a wire type",
                            f"use one of {', '.join(sorted(OVERRIDE_TARGETS))}",
                        )
                        for key, value in bad.items()
                    ]
                )
            return {str(k): str(v) for k, v in overrides.items()}
    return {}


def extract(app_path: str) -> ir.Manifest:
    """Import the app and build its manifest (in this process; extract.py wraps it)."""
    overrides = load_overrides()
    app = load_app(app_path)
    return build_manifest(app, app_path, overrides)


def _unique_spec(unique: Unique | None) -> ir.UniqueSpec | None:
    if unique is None:
        return None
    args = None if unique.args is None else sorted(unique.args)
    return ir.UniqueSpec(args=args, period_s=unique.period_s, states=unique.blocking_states)


def _limit_spec(limit: Limit | None) -> ir.LimitSpec | None:
    if limit is None:
        return None
    per_s = None if limit.per is None else limit.per.total_seconds()
    return ir.LimitSpec(concurrency=limit.concurrency, rate=limit.rate, per_s=per_s, key=limit.key)
