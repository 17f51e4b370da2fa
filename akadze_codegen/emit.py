"""Manifest -> the files of the generated package, as bytes. Pure: no IO, no clock, no paths.

Layout (DESIGN.md section 2): ``__init__.py`` (re-exports the client modules; tasks
registered outside any include), one ``<client>.py`` per included module, ``_types.py``
(every mirrored type, once, so mutual recursion across worker modules needs no import cycle),
``py.typed`` and ``_manifest.json``. Every ``.py`` file opens with the ``@generated`` marker and
a content hash, so ``--check`` can tell a stale file from one edited by hand.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import libcst as cst

from akadze_codegen import nodes, signature as ir
from akadze_codegen.annotations import IMPORTS, STDLIB, annotation, refs as _refs
from akadze_codegen.classes import definition_code, docstring, quoted, typeddict_class
from akadze_codegen.layout import ALIAS_NAME_LIMITS, Scope, fit
from akadze_codegen.naming import class_name
from akadze_codegen.write import CONTENT_PREFIX, MANIFEST_FILE, MARKER, content_hash

TYPES_MODULE = "_types"

_BUILTIN_NAMES = frozenset(
    {"bool", "bytes", "dict", "float", "frozenset", "int", "list", "set", "str", "tuple"}
)


def render(manifest: ir.Manifest) -> dict[str, bytes]:
    """Every file of the package, by name relative to the package directory."""
    files: dict[str, bytes] = {}
    by_client: dict[str | None, list[ir.TaskSignature]] = {}
    for task in manifest.tasks:
        by_client.setdefault(task.client, []).append(task)
    for module in manifest.modules:
        body = _shortest_fitting(
            _task_module,
            manifest,
            f"Producer clients of the tasks that ``{module.module}`` registers.",
            by_client.get(module.client, []),
            submodules=(),
        )
        files[f"{module.client}.py"] = _finish(manifest, body)
    init_doc = f"Typed producer clients of ``{manifest.app}``."
    submodules = [m.client for m in manifest.modules]
    files["__init__.py"] = _finish(
        manifest, _shortest_fitting(_task_module, manifest, init_doc, by_client.get(None, []), submodules)
    )
    files[f"{TYPES_MODULE}.py"] = _finish(manifest, _shortest_fitting(_types_module, manifest))
    files["py.typed"] = b""
    files[MANIFEST_FILE] = ir.encode_manifest(manifest)
    return dict(sorted(files.items()))


def _finish(manifest: ir.Manifest, body: str) -> bytes:
    header = f"{MARKER} from {manifest.app}. DO NOT EDIT.\n{CONTENT_PREFIX}{content_hash(body)}\n"
    text = header + body
    cst.parse_module(text)  # every file is valid Python, or generation fails here
    return text.encode()


# -- _types.py -----------------------------------------------------------------------------


def _shortest_fitting(build: Callable[..., str], *args: Any, **kwargs: Any) -> str:
    """A module rendered with the longest alias names that keep its lines as short as the
    shortest names do (``PaymentsPayAmount`` where it fits; ``Amount``, then shorter, where a
    long field or task name leaves no room)."""
    best: tuple[int, str] | None = None
    for limit in ALIAS_NAME_LIMITS:
        text = build(*args, **kwargs, name_limit=limit)
        # a line too long, or a value wrapped in parentheses (which ruff unwraps at a longer
        # line length): the fallbacks classes._struct_field takes when an alias name is too long
        long_lines = sum(not nodes.fits(line) or line.endswith(" = (") for line in text.splitlines())
        if long_lines == 0:
            return text
        if best is None or long_lines < best[0]:
            best = (long_lines, text)
    assert best is not None
    return best[1]


def _types_module(manifest: ir.Manifest, name_limit: int) -> str:
    names = {d.name for d in manifest.types}
    scope = Scope(shadowed=frozenset(names & _BUILTIN_NAMES), taken={*names, *IMPORTS}, name_limit=name_limit)
    typevars = sorted({p for d in manifest.types if isinstance(d, ir.StructDef) for p in d.type_params})
    scope.taken.update(typevars)
    blocks: list[str] = []
    if typevars:
        scope.imports.add("_t")
        blocks.append("".join(f'{v} = _t.TypeVar("{v}")\n' for v in typevars))
    classes = [d for d in manifest.types if not isinstance(d, ir.NewTypeDef)]
    newtypes = _newtypes_in_order([d for d in manifest.types if isinstance(d, ir.NewTypeDef)])
    for definition in classes:
        blocks.append(definition_code(definition, scope))
    if newtypes:
        lines = []
        for nt in newtypes:
            expr = nodes.code(annotation(nt.type, scope))
            lines.append(f'{nt.name} = {nodes.code(scope.name("_t.NewType"))}("{nt.name}", {expr})\n')
        blocks.append("".join(lines))
    doc = '"""Mirrors of the worker\'s argument types: the same wire shape, no worker import."""\n'
    if scope.aliases:  # after the classes they name (their annotations are lazy here)
        blocks.append(_aliases(scope, "".join(blocks)))
    return _module(doc, scope.imports, [], blocks)


def _newtypes_in_order(newtypes: list[ir.NewTypeDef]) -> list[ir.NewTypeDef]:
    """NewTypes are evaluated at import: one over another must come after it."""
    remaining = {nt.name: nt for nt in newtypes}
    ordered: list[ir.NewTypeDef] = []
    while remaining:
        ready = (
            sorted(name for name, nt in remaining.items() if not (_refs(nt.type) & remaining.keys()))
            or sorted(remaining)[:1]
        )
        for name in ready:
            ordered.append(remaining.pop(name))
    return ordered


# -- task modules and __init__.py ----------------------------------------------------------


def _task_module(
    manifest: ir.Manifest,
    doc: str,
    tasks: Sequence[ir.TaskSignature],
    submodules: Sequence[str],
    name_limit: int,
) -> str:
    defined: set[str] = set(submodules)
    for task in tasks:
        cls = class_name(task.attr)
        defined |= {task.attr, cls, f"{cls}Args"}
    used: set[str] = set()
    for task in tasks:
        for param in task.params:
            used |= _refs(param.type)
        if task.returns is not None:
            used |= _refs(task.returns)
    used = _closure(used, {d.name: d for d in manifest.types})
    # mirrors are re-exported through __all__ (``X as X`` trips ruff's default rules), except
    # one whose name a task here also generates: that one is spelled _ty.X
    reexport = sorted(name for name in used if name not in defined)
    qualified = used - set(reexport)
    scope = Scope(
        ref=lambda name: f"_ty.{name}" if name in qualified else name,
        shadowed=frozenset(defined & _BUILTIN_NAMES),
        taken={*defined, *reexport, *IMPORTS, "_ty"},
        name_limit=name_limit,
    )
    blocks: list[str] = []
    for task in tasks:
        blocks.extend(_task(task, scope))
    if scope.aliases:  # defined above their use: this module's annotations are evaluated
        blocks.insert(0, _aliases(scope, "".join(blocks)))
    local: list[str] = []
    if qualified:
        local.append(f"from . import {TYPES_MODULE} as _ty\n")
    if submodules:
        local.append(_import_from(".", submodules))
    if reexport:
        local.append(_import_from(f".{TYPES_MODULE}", reexport))
    exported = set(reexport) | defined
    if exported:
        blocks.append(_all(exported))
    # no ``from __future__ import annotations`` here: Python 3.11 reads NotRequired wrong from
    # a string annotation, and the runtime checks the keys; every name is defined above its use
    return _module(f'"""{doc}"""\n', scope.imports, local, blocks, future=False)


def _closure(names: set[str], definitions: dict[str, ir.Definition]) -> set[str]:
    """``names`` and every mirror they mention: a producer needs them all to build a value."""
    seen: set[str] = set()
    pending = sorted(names)
    while pending:
        name = pending.pop()
        if name in seen or name not in definitions:
            continue
        seen.add(name)
        definition = definitions[name]
        if isinstance(definition, ir.NewTypeDef):
            pending.extend(_refs(definition.type))
        elif not isinstance(definition, ir.EnumDef):
            for f in definition.fields:
                pending.extend(_refs(f.type))
    return seen


def isort_key(name: str) -> tuple[int, list[tuple[int, int | str]], str]:
    """ruff's isort order (also RUF022's for __all__): CONSTANTS, Classes, the rest;
    natural and case-insensitive within each group."""
    if name.isupper() and len(name) > 1:
        group = 0
    elif name[:1].isupper():
        group = 1
    else:
        group = 2
    return group, _natural(name.lower()), name


def all_key(name: str) -> tuple[int, list[tuple[int, int | str]]]:
    """RUF022's order for ``__all__``: the same groups, natural but case-sensitive."""
    return isort_key(name)[0], _natural(name)


def _natural(text: str) -> list[tuple[int, int | str]]:
    return [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", text) if p]


def _task(task: ir.TaskSignature, scope: Scope) -> list[str]:
    scope.imports |= {"_t", "_rt"}
    cls = class_name(task.attr)
    args = f"{cls}Args"
    args_block = typeddict_class(args, f"Arguments of task ``{task.name}``.", task.params, scope, owner=cls)
    summary = f"Task ``{task.name}`` on queue ``{task.queue}``."
    if task.doc:
        summary = f"{summary[:-1]}: {task.doc}"
    # long task names make long lines: exploded the way ruff explodes them, with a magic
    # trailing comma wherever the syntax has one
    signature = f"    async def enqueue(self, /, **kwargs: _t.Unpack[{args}]) -> _rt.Job:"
    if not nodes.fits(signature):
        params = ["self", "/", f"**kwargs: _t.Unpack[{args}]"]
        signature = nodes.exploded("async def enqueue(", params, ") -> _rt.Job:", indent="    ")
    bind = f"    def bind(self, /, **kwargs: _t.Unpack[{args}]) -> _rt.Call:"
    if not nodes.fits(bind):
        params = ["self", "/", f"**kwargs: _t.Unpack[{args}]"]
        bind = nodes.exploded("def bind(", params, ") -> _rt.Call:", indent="    ")
    enqueue = (
        f"{signature}\n"
        '        """Insert one job; ``using(session=..., delay=...)`` sets the options."""\n'
        "        return await self._enqueue(kwargs)\n"
        "\n"
        f"{bind}\n"
        '        """The task with these arguments, not enqueued: a step of an ``akadze.Workflow``."""\n'
        "        return self._bind(kwargs)\n"
    )
    base = f"_rt.RemoteTask[{args}]"
    if task.returns is not None:
        # the result type: what result_of decodes to (and what mypy checks a producer does with it)
        room = nodes.LINE_LENGTH - len(f"class {cls}(_rt.RemoteTask[{args}, ]):")
        result = nodes.code(annotation(fit(task.returns, scope, max(room, 20), f"{cls}|Result"), scope))
        if len(result) > max(room, 20):
            result = nodes.code(annotation(scope.hoist(task.returns, f"{cls}|Result"), scope))
        base = f"_rt.RemoteTask[{args}, {result}]"
    header = f"class {cls}({base}):"
    if not nodes.fits(header):
        header = nodes.exploded(f"class {cls}(", [base], "):")
    class_block = f"{header}\n{docstring(summary)}\n{enqueue}"
    items = [
        quoted(task.name),
        f"queue={quoted(task.queue)}",
        f"priority={task.priority}",
        f"max_attempts={task.max_attempts}",
        f"args_fp={quoted(task.args_fp)}",
        f"args_type={args}",
    ]
    if task.unique is not None:
        items.append(f"unique={_unique_call(task.unique)}")
    if task.limit is not None:
        items.append(f"limit={_limit_call(task.limit)}")
    head = f"{task.attr}: _t.Final = "
    if nodes.fits(f"{head}{cls}("):
        instance = nodes.exploded(f"{head}{cls}(", items, ")")
    else:
        call = nodes.exploded(f"{cls}(", items, ")", indent="    ")
        instance = f"{head}(\n{call}\n)"
    return [args_block, class_block, instance + "\n"]


def _aliases(scope: Scope, body: str) -> str:
    """The hoisted aliases that are used (hoisting can leave one behind): by the body, or by
    another used alias. They are in dependency order, so one pass from the end finds them."""
    used_text = body
    kept: list[str] = []
    for name, text in reversed(scope.aliases):
        if re.search(rf"\b{name}\b", used_text):
            kept.append(text)
            used_text += "\n" + text
    return "".join(f"{text}\n" for text in reversed(kept))


def _import_from(module: str, names: Iterable[str]) -> str:
    items = sorted(names, key=isort_key)
    line = f"from {module} import {', '.join(items)}"
    if nodes.fits(line):
        return line + "\n"
    return nodes.exploded(f"from {module} import (", items, ")") + "\n"


def _all(names: Iterable[str]) -> str:
    items = [quoted(n) for n in sorted(names, key=all_key)]
    line = f"__all__ = [{', '.join(items)}]"
    if nodes.fits(line):
        return line + "\n"
    return nodes.exploded("__all__ = [", items, "]") + "\n"


def _module(
    docstring: str, imports: set[str], local: list[str], blocks: list[str], future: bool = True
) -> str:
    """Docstring, import groups (stdlib, third party, package), then the blocks."""
    parts = [docstring, "\nfrom __future__ import annotations\n" if future else ""]
    stdlib = sorted(a for a in imports if a in STDLIB)
    third = sorted((a for a in imports if a not in STDLIB), key=lambda a: IMPORTS[a])
    for group in (
        [f"import {IMPORTS[a]} as {a}\n" for a in sorted(stdlib, key=lambda a: IMPORTS[a])],
        [f"import {IMPORTS[a]} as {a}\n" for a in third],
        local,
    ):
        if group:
            parts.append("\n" + "".join(group))
    text = "".join(parts)
    for i, block in enumerate(blocks):
        # isort wants one blank line after the imports unless a class follows; ruff
        # format wants two after a class
        text += "\n" if i == 0 and not block.startswith("class ") else "\n\n"
        text += block
    return text


def _unique_call(unique: ir.UniqueSpec) -> str:
    """The client's Unique, built from the manifest's record (akadze.client.unique_option)."""
    args = "None" if unique.args is None else "[" + ", ".join(quoted(name) for name in unique.args) + "]"
    states = "[" + ", ".join(quoted(state) for state in unique.states) + "]"
    return f"_rt.unique_option(args={args}, period_s={unique.period_s!r}, states={states})"


def _limit_call(limit: ir.LimitSpec) -> str:
    """The client's Limit, built from the manifest's record (akadze.client.limit_option): its
    enqueue then parks a job due now, as the worker's own enqueue does."""
    return (
        f"_rt.limit_option(concurrency={limit.concurrency!r}, rate={limit.rate!r}, "
        f"per_s={limit.per_s!r}, key={'None' if limit.key is None else quoted(limit.key)})"
    )
