"""Mirror names: each definition's name in the generated package, and references renamed to it.

Discovery keys definitions by ``module:qualname`` (``#2`` for a second class of the same name);
the generated code names them after the class, or, when two classes share a name, after the
shortest module suffix that tells them apart (``ShippingAddress``, ``BillingAddress``).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from akadze_codegen import signature as ir


def mirror_names(entries: dict[str, tuple[str, str]]) -> dict[str, str]:
    """Unique mirror names: the class name, or the shortest module suffix that tells apart."""
    by_short: dict[str, list[str]] = {}
    for key, (short, _) in entries.items():
        by_short.setdefault(short, []).append(key)
    names: dict[str, str] = {}
    for short, keys in by_short.items():
        if len(keys) == 1:
            names[keys[0]] = short
            continue
        keys.sort()
        depth = 1
        while True:
            candidates = {
                key: _camel(entries[key][1].split(".")[-depth:]) + short + _suffix(key) for key in keys
            }
            if len(set(candidates.values())) == len(keys) or depth > 20:
                break
            depth += 1
        names.update(candidates)
    used: set[str] = set()
    for key in sorted(names):
        name = names[key]
        while name in used or name in _RESERVED:
            name += "_"
        used.add(name)
        names[key] = name
    return names


#: names the generated modules define themselves
_RESERVED = frozenset({"Job", "Any", "TypeVar"})


def _suffix(key: str) -> str:
    return key.rsplit("#", 1)[1] if "#" in key.rsplit(":", 1)[-1] else ""


def _camel(parts: list[str]) -> str:
    return "".join(p[:1].upper() + p[1:] for part in parts for p in part.split("_") if p)


def rename(node: ir.TypeNode, names: Mapping[str, str]) -> ir.TypeNode:
    """``node`` with definition keys replaced by mirror names."""
    if isinstance(node, ir.Ref):
        return ir.Ref(names.get(node.name, node.name), [rename(a, names) for a in node.args])
    if isinstance(node, ir.Lit):
        return ir.Lit(
            [
                ir.EnumMember(names.get(v.enum, v.enum), v.member) if isinstance(v, ir.EnumMember) else v
                for v in node.values
            ]
        )
    return ir.map_children(node, lambda child: rename(child, names))


def rename_definition(definition: ir.Definition, name: str, names: Mapping[str, str]) -> ir.Definition:
    """``definition`` under its mirror ``name``, its references renamed by ``names``."""
    if isinstance(definition, ir.StructDef | ir.TypedDictDef | ir.NamedTupleDef):
        fields = [msgspec.structs.replace(f, type=rename(f.type, names)) for f in definition.fields]
        return msgspec.structs.replace(definition, name=name, fields=fields)
    if isinstance(definition, ir.NewTypeDef):
        return msgspec.structs.replace(definition, name=name, type=rename(definition.type, names))
    return msgspec.structs.replace(definition, name=name)
