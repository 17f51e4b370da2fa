"""IR type nodes -> TypeScript types, and the mirror declarations of ``_types.ts``.

How each type travels (docs/typescript.md has the table): numbers as ``number`` (an ``int``
also as ``bigint``, for values past 2**53), a Decimal as its exact ``string`` (or a
``bigint``), a datetime as a ``Date`` or its RFC 3339 text, a date and a time as ISO text, a
duration as a ``number`` of seconds, bytes as a ``Uint8Array`` (base64 on the wire), a UUID,
a path and the IP types as ``string``; models, dataclasses and TypedDicts as interfaces keyed
by their wire names; enums and Literals as literal unions; NamedTuples and tuples as readonly
tuples; lists and sets as readonly arrays (a ``ReadonlySet`` too for a set). Pure, like the
Python emitter.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

import msgspec

from akadze_codegen import signature as ir

_PRIMS: dict[str, str] = {
    "any": "unknown",
    "none": "null",
    "bool": "boolean",
    "int": "number | bigint",
    "float": "number",
    "str": "string",
    "bytes": "Uint8Array",
    "datetime": "Date | string",
    "date": "string",
    "time": "string",
    "timedelta": "number",
    "uuid": "string",
    "decimal": "string | bigint",
}

#: words TypeScript reserves, and the global types generated code names: a mirror or a task
#: named so gets a trailing ``_``
RESERVED = frozenset(
    {
        "break", "case", "catch", "class", "const", "continue", "debugger", "default", "delete",
        "do", "else", "enum", "export", "extends", "false", "finally", "for", "function", "if",
        "import", "in", "instanceof", "new", "null", "return", "super", "switch", "this",
        "throw", "true", "try", "typeof", "var", "void", "while", "with", "implements",
        "interface", "let", "package", "private", "protected", "public", "static", "yield",
        "await", "any", "boolean", "number", "string", "symbol", "bigint", "unknown", "never",
        "object", "undefined", "Date", "Uint8Array", "ReadonlySet", "Readonly", "Record",
        "Partial", "Array", "Map", "Set", "Promise", "Buffer",
    }
)  # fmt: skip

_IDENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")


def ts_name(name: str) -> str:
    """A name as TypeScript may declare it: reserved words get a trailing ``_``."""
    return f"{name}_" if name in RESERVED else name


def prop(key: str) -> str:
    """An interface key: bare when it is an identifier, else quoted."""
    return key if _IDENT.match(key) else json.dumps(key)


def _literal(value: ir.LiteralValue, enums: Mapping[str, ir.EnumDef]) -> str:
    if isinstance(value, ir.EnumMember):
        definition = enums.get(value.enum)
        found = [v for name, v in definition.members if name == value.member] if definition else []
        return json.dumps(found[0]) if found else "never"
    return json.dumps(value)


def ts_type(node: ir.TypeNode, enums: Mapping[str, ir.EnumDef]) -> str:
    """The TypeScript type a producer passes for ``node``."""
    if isinstance(node, ir.Prim):
        return _PRIMS.get(node.name, "string")
    if isinstance(node, ir.Annotated):
        return ts_type(node.type, enums)
    if isinstance(node, ir.Json):
        return "string"
    if isinstance(node, ir.Seq):
        item = _item(ts_type(node.item, enums))
        if node.kind in ("set", "frozenset"):
            return f"readonly {item}[] | ReadonlySet<{ts_type(node.item, enums)}>"
        return f"readonly {item}[]"
    if isinstance(node, ir.Tuple):
        return f"readonly [{', '.join(ts_type(i, enums) for i in node.items)}]"
    if isinstance(node, ir.Dict):
        value = ts_type(node.value, enums)
        key = node.key.type if isinstance(node.key, ir.Annotated) else node.key
        if key in (ir.Prim("int"), ir.Prim("float")):
            return f"{{ readonly [key: number]: {value} }}"
        keys = _finite_keys(key, enums)
        if keys is not None:
            return f"{{ readonly [K in {keys}]?: {value} }}"
        return f"{{ readonly [key: string]: {value} }}"
    if isinstance(node, ir.Union):
        parts: list[str] = []
        for member in node.members:
            for part in _split(ts_type(member, enums)):
                if part not in parts:
                    parts.append(part)
        return " | ".join(parts)
    if isinstance(node, ir.Lit):
        return " | ".join(dict.fromkeys(_literal(v, enums) for v in node.values)) or "never"
    if isinstance(node, ir.Ref):
        if not node.args:
            return node.name
        return f"{node.name}<{', '.join(ts_type(a, enums) for a in node.args)}>"
    return node.name  # ir.Var


def _finite_keys(key: ir.TypeNode, enums: Mapping[str, ir.EnumDef]) -> str | None:
    if isinstance(key, ir.Lit) and all(isinstance(v, str | ir.EnumMember) for v in key.values):
        return ts_type(key, enums)
    if isinstance(key, ir.Ref) and key.name in enums and enums[key.name].base in ("str", "strenum"):
        return key.name
    return None


def _item(text: str) -> str:
    """An array's item type, parenthesised when it is a union or a function-like type."""
    return f"({text})" if " | " in text or text.startswith("readonly ") else text


def _split(text: str) -> list[str]:
    """A union's top-level members (``|`` outside brackets)."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char in "<[({"
        depth -= char in ">])}"
        if char == "|" and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return parts


def jsdoc(lines: list[str], indent: str = "") -> str:
    """A ``/** ... */`` comment of ``lines`` (nothing for none)."""
    clean = [line.replace("*/", "* /") for line in lines if line]
    if not clean:
        return ""
    if len(clean) == 1:
        return f"{indent}/** {clean[0]} */\n"
    body = "".join(f"{indent} * {line}\n" for line in clean)
    return f"{indent}/**\n{body}{indent} */\n"


def field_notes(f: ir.Field | ir.Param) -> list[str]:
    """What the docs of a field say beyond its type: the worker's default, its constraints,
    what the worker checks that the client cannot."""
    notes = []
    if f.default is not None:
        notes.append(f"worker default: {f.default}")
    node = f.type
    if isinstance(node, ir.Annotated):
        given = {k: v for k, v in msgspec.structs.asdict(node.meta).items() if v is not None}
        notes.append("constraints: " + ", ".join(f"{k}={v!r}" for k, v in given.items()))
    notes.extend(f"the worker also checks: {check} (the client cannot)" for check in f.checks)
    return notes


def declaration(definition: ir.Definition, enums: Mapping[str, ir.EnumDef]) -> str:
    """The TypeScript declaration of one mirror."""
    origin = f"Mirror of `{definition.origin}`"
    if isinstance(definition, ir.EnumDef):
        values = " | ".join(dict.fromkeys(json.dumps(v) for _, v in definition.members)) or "never"
        flag = definition.base in ("flag", "intflag")
        members = "".join(f"  {prop(name)}: {json.dumps(v)},\n" for name, v in definition.members)
        kind = "number" if flag else values
        note = " (a flag: any combination of the members' bits)" if flag else ""
        return (
            jsdoc([f"{origin}{note}."])
            + f"export type {definition.name} = {kind};\n"
            + f"export const {definition.name} = {{\n{members}}} as const;\n"
        )
    if isinstance(definition, ir.NewTypeDef):
        return (
            jsdoc([f"{origin} (a NewType)."])
            + f"export type {definition.name} = {ts_type(definition.type, enums)};\n"
        )
    if isinstance(definition, ir.NamedTupleDef):
        items = ", ".join(f"{f.name}: {ts_type(f.type, enums)}" for f in definition.fields)
        return (
            jsdoc([f"{origin} (an array on the wire)."])
            + f"export type {definition.name} = readonly [{items}];\n"
        )
    params = ""
    if isinstance(definition, ir.StructDef) and definition.type_params:
        params = f"<{', '.join(definition.type_params)}>"
    notes = [f"{origin}" + (f" ({definition.source})." if isinstance(definition, ir.StructDef) else ".")]
    if isinstance(definition, ir.StructDef) and definition.forbid_unknown:
        notes.append("Unknown fields are refused.")
    if isinstance(definition, ir.StructDef):
        notes.extend(f"The worker also checks: {check} (the client cannot)." for check in definition.checks)
    body = "".join(interface_field(f, enums) for f in definition.fields)
    return jsdoc(notes) + f"export interface {definition.name}{params} {{\n{body}}}\n"


def interface_field(f: ir.Field | ir.Param, enums: Mapping[str, ir.EnumDef]) -> str:
    """One line of an interface: a field under its wire name (a parameter under its name)."""
    key = f.wire if isinstance(f, ir.Field) else f.name
    # a tag the worker defaults stays required here: a discriminated union needs it to choose
    tag = isinstance(f, ir.Field) and f.literal_default
    optional = "" if f.required or tag else "?"
    return jsdoc(field_notes(f), "  ") + f"  {prop(key)}{optional}: {ts_type(f.type, enums)};\n"
