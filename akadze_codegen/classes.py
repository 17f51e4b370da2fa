"""The mirror classes of the generated ``_types`` module: one per definition (a msgspec Struct,
a TypedDict, a NamedTuple or an enum), as source text. Pure, like emit.py, which places them.
"""

from __future__ import annotations

import keyword
from collections.abc import Sequence

from akadze_codegen import nodes, signature as ir
from akadze_codegen.annotations import annotation, literal_value, referenced_names as _referenced
from akadze_codegen.layout import Scope, alias_hint, field_annotation

_ENUM_BASES = {
    "enum": "_enum.Enum",
    "str": "str, _enum.Enum",
    "int": "int, _enum.Enum",
    "strenum": "_enum.StrEnum",
    "intenum": "_enum.IntEnum",
    "flag": "_enum.Flag",
    "intflag": "_enum.IntFlag",
}


def definition_code(definition: ir.Definition, scope: Scope) -> str:
    """The source of one mirror class (Struct, TypedDict, NamedTuple or enum) in ``scope``."""
    if isinstance(definition, ir.EnumDef):
        return _enum(definition, scope)
    if isinstance(definition, ir.StructDef):
        return _struct(definition, scope)
    if isinstance(definition, ir.TypedDictDef):
        return _typeddict(definition, scope)
    if isinstance(definition, ir.NamedTupleDef):
        return _namedtuple(definition, scope)
    raise AssertionError(definition)  # NewTypeDef is rendered apart


def docstring(text: str, indent: str = "    ") -> str:
    """``text`` as a one-line docstring at ``indent``, with nothing that could end it early."""
    clean = text.replace("\\", "/").replace('"', "'").strip()
    return f'{indent}"""{clean}"""\n'


def _class_head(header: str, doc: str, has_body: bool) -> list[str]:
    """A mirror class's first lines: ``class ...:``, its docstring, and a blank line before a body."""
    return [header, docstring(doc), *(["\n"] if has_body else [])]


def _enum(definition: ir.EnumDef, scope: Scope) -> str:
    scope.imports.add("_enum")
    header = f"class {definition.name}({_ENUM_BASES[definition.base]}):\n"
    lines = _class_head(header, f"Mirror of ``{definition.origin}``.", bool(definition.members))
    canonical: dict[tuple[type, str | int], str] = {}
    for name, value in definition.members:
        first = canonical.setdefault((type(value), value), name)
        # an alias names its canonical member (a repeated literal trips ruff's PIE796)
        text = first if first != name else nodes.code(nodes.literal(value))
        lines.append(f"    {name} = {text}\n")
    return "".join(lines)


def _field_names(fields: Sequence[ir.Field], renamable: bool) -> list[str]:
    """Python names for a class's fields that shadow nothing its annotations mention."""
    mentioned: set[str] = set()
    for f in fields:
        mentioned |= _referenced(f.type)
    if renamable:
        mentioned |= {"_msgspec", "_t"}
    out: list[str] = []
    taken = {f.name for f in fields}
    for f in fields:
        name = f.name
        if renamable and (name in mentioned or name.startswith("_") or keyword.iskeyword(name)):
            base = name.strip("_") or "field"
            name = f"{base}_"
            while name in mentioned or name in taken:
                name += "_"
            taken.add(name)
        out.append(name)
    return out


def _default_comment(f: ir.Field | ir.Param) -> str:
    """The comments above a field: the worker's default, and what the worker checks that the
    client's guard cannot (a validator, a date that must be in the future)."""
    lines = [] if f.default is None else [f"    # worker default: {f.default}\n"]
    lines.extend(f"    # the worker also checks: {check} (the client cannot)\n" for check in f.checks)
    return "".join(lines)


def _struct(definition: ir.StructDef, scope: Scope) -> str:
    bases = ["_msgspec.Struct"]
    scope.imports.add("_msgspec")
    if definition.type_params:
        scope.imports.add("_t")
        bases.append(f"_t.Generic[{', '.join(definition.type_params)}]")
    options = "kw_only=True, forbid_unknown_fields=True" if definition.forbid_unknown else "kw_only=True"
    header = f"class {definition.name}({', '.join(bases)}, {options}):\n"
    if not nodes.fits(header.rstrip()):
        header = nodes.exploded(f"class {definition.name}(", [*bases, *options.split(", ")], "):") + "\n"
    doc = f"Mirror of ``{definition.origin}`` ({definition.source})."
    if definition.checks:
        doc += f" The worker also checks: {', '.join(definition.checks)} (the client cannot)."
    lines = _class_head(header, doc, bool(definition.fields))
    for f, name in zip(definition.fields, _field_names(definition.fields, renamable=True), strict=True):
        lines.append(_default_comment(f))
        lines.append(_struct_field(f, name, scope, alias_hint(definition.name, f.name)))
    return "".join(lines)


def _struct_field(f: ir.Field, name: str, scope: Scope, hint: str) -> str:
    """One field line, short enough for ruff to leave alone (see layout.fit)."""
    node = f.type
    if f.literal_default and isinstance(f.type, ir.Lit):
        value = nodes.code(literal_value(f.type.values[0], scope))
        if name != f.wire:
            value = f"_msgspec.field(default={value}, name={quoted(f.wire)})"
    elif f.required:
        value = f"_msgspec.field(name={quoted(f.wire)})" if name != f.wire else ""
    else:
        node = ir.Union([node, ir.Ref("_msgspec.UnsetType")])
        value = "_msgspec.UNSET"
        if name != f.wire:
            value = f"_msgspec.field(default=_msgspec.UNSET, name={quoted(f.wire)})"
    suffix = f" = {value}" if value else ""
    ann = field_annotation(node, scope, f"    {name}: ", suffix, hint=hint)
    line = f"    {name}: {ann}{suffix}"
    if nodes.fits(line) or not value:
        return line + "\n"
    # still too long: one alias for the whole annotation, then the value split as ruff splits
    # it (with a magic trailing comma, so that a longer line length keeps it split)
    ann = nodes.code(annotation(scope.hoist(node, hint), scope))
    line = f"    {name}: {ann}{suffix}"
    if nodes.fits(line):
        return line + "\n"
    head = f"    {name}: {ann} = _msgspec.field("
    if value.startswith("_msgspec.field(") and nodes.fits(head):
        arguments = value.removeprefix("_msgspec.field(").removesuffix(")").split(", ")
        return nodes.exploded(head.lstrip(), arguments, ")", indent="    ") + "\n"
    return f"    {name}: {ann} = (\n        {value}\n    )\n"


def quoted(text: str) -> str:
    """``text`` as a Python string literal, quoted as ruff prefers."""
    return nodes.code(nodes.string(text))


def _typeddict(definition: ir.TypedDictDef, scope: Scope) -> str:
    scope.imports.add("_t")
    doc = f"Mirror of ``{definition.origin}`` (TypedDict)."
    if all(f.name.isidentifier() and not keyword.iskeyword(f.name) for f in definition.fields):
        return typeddict_class(definition.name, doc, definition.fields, scope)
    # keys that are not identifiers need the functional form; string values stay lazy
    items = []
    for f in definition.fields:
        ann = nodes.code(annotation(f.type, scope))
        if not f.required:
            ann = f"_t.NotRequired[{ann}]"
        items.append(f"{quoted(f.wire)}: {quoted(ann)}")
    return (
        nodes.exploded(f'{definition.name} = _t.TypedDict(\n    "{definition.name}",\n    {{', items, "},\n)")
        + "\n"
    )


def typeddict_class(
    name: str, doc: str, fields: Sequence[ir.Field] | Sequence[ir.Param], scope: Scope, owner: str = ""
) -> str:
    """A TypedDict class of ``fields`` (a task's arguments or a mirror); optional ones ``NotRequired``."""
    lines = _class_head(f"class {name}(_t.TypedDict):\n", doc, bool(fields))
    for f in fields:
        wrap = "" if f.required else "_t.NotRequired"
        hint = alias_hint(owner or name, f.name)
        ann = field_annotation(f.type, scope, f"    {f.name}: ", wrap=wrap, hint=hint)
        lines.append(_default_comment(f))
        lines.append(f"    {f.name}: {ann}\n")
    return "".join(lines)


def _namedtuple(definition: ir.NamedTupleDef, scope: Scope) -> str:
    scope.imports.add("_t")
    doc = f"Mirror of ``{definition.origin}`` (NamedTuple; an array on the wire)."
    lines = _class_head(f"class {definition.name}(_t.NamedTuple):\n", doc, bool(definition.fields))
    for f, name in zip(definition.fields, _field_names(definition.fields, renamable=True), strict=True):
        hint = alias_hint(definition.name, f.name)
        lines.append(f"    {name}: {field_annotation(f.type, scope, f'    {name}: ', hint=hint)}\n")
    return "".join(lines)
