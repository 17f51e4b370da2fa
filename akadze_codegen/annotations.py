"""IR type nodes -> libcst annotation expressions, plus the imports each one needs.

Every import is aliased with a leading underscore (``typing as _t``), so a task, parameter or
field named ``typing``, ``list`` or ``id`` cannot shadow it. A builtin that a module-level
name does shadow is spelled ``_b.list`` (``import builtins as _b``). What an annotation *says*
is decided here; how it is *laid out* within the line length (aliases hoisted, names
shortened) is layout.py's, which holds the :class:`Scope` an annotation is spelled in.
"""

from __future__ import annotations

import decimal
from typing import TYPE_CHECKING

import libcst as cst
import msgspec

from akadze_codegen import nodes, signature as ir

if TYPE_CHECKING:
    from akadze_codegen.layout import Scope

#: alias -> module, for every import generated code may need
IMPORTS: dict[str, str] = {
    "_abc": "collections.abc",
    "_b": "builtins",
    "_dt": "datetime",
    "_decimal": "decimal",
    "_enum": "enum",
    "_ipaddress": "ipaddress",
    "_pathlib": "pathlib",
    "_t": "typing",
    "_uuid": "uuid",
    "_msgspec": "msgspec",
    "_rt": "akadze.client",
}
#: aliases of the standard library (the first import group); the rest are third party
STDLIB = frozenset({"_abc", "_b", "_dt", "_decimal", "_enum", "_ipaddress", "_pathlib", "_t", "_uuid"})

_PRIMS: dict[str, str] = {
    "any": "_t.Any",
    "bool": "bool",
    "bytes": "bytes",
    "date": "_dt.date",
    "datetime": "_dt.datetime",
    "decimal": "_decimal.Decimal",
    "float": "float",
    "int": "int",
    "none": "None",
    "str": "str",
    "time": "_dt.time",
    "timedelta": "_dt.timedelta",
    "uuid": "_uuid.UUID",
}
#: str on the wire; the mirror takes a str or these (the client encodes them with str())
_STR_LIKE: dict[str, tuple[str, ...]] = {
    "path": ("_pathlib.PurePath",),
    "ipv4address": ("_ipaddress.IPv4Address",),
    "ipv6address": ("_ipaddress.IPv6Address",),
    "ipaddress": ("_ipaddress.IPv4Address", "_ipaddress.IPv6Address"),
    "ipv4network": ("_ipaddress.IPv4Network",),
    "ipv6network": ("_ipaddress.IPv6Network",),
    "ipnetwork": ("_ipaddress.IPv4Network", "_ipaddress.IPv6Network"),
    "ipv4interface": ("_ipaddress.IPv4Interface",),
    "ipv6interface": ("_ipaddress.IPv6Interface",),
    "ipinterface": ("_ipaddress.IPv4Interface", "_ipaddress.IPv6Interface"),
}
#: the constraints msgspec.Meta carries, by the type they constrain; the others are rendered
#: as akadze.client.Constraints
_META_KEYS: dict[str, frozenset[str]] = {
    "int": frozenset({"gt", "ge", "lt", "le", "multiple_of"}),
    "float": frozenset({"gt", "ge", "lt", "le", "multiple_of"}),
    "str": frozenset({"pattern", "min_length", "max_length"}),
    "bytes": frozenset({"min_length", "max_length"}),
    "datetime": frozenset({"tz"}),
    "time": frozenset({"tz"}),
}
#: how a bound given as text is written back as a value of its type
_BOUND_EXPR: dict[str, str] = {
    "decimal": "_decimal.Decimal",
    "date": "_dt.date.fromisoformat",
    "datetime": "_dt.datetime.fromisoformat",
    "time": "_dt.time.fromisoformat",
}
BUILTINS = frozenset({"bool", "bytes", "dict", "float", "frozenset", "int", "list", "set", "str", "tuple"})
_SEQ = {"list": "list", "set": "set", "frozenset": "frozenset", "sequence": "_abc.Sequence"}


def annotation(node: ir.TypeNode, scope: Scope) -> cst.BaseExpression:
    """The annotation expression of ``node`` in ``scope``."""
    if isinstance(node, ir.Prim):
        if node.name in _STR_LIKE:
            return nodes.union([scope.name("str"), *(scope.name(n) for n in _STR_LIKE[node.name])])
        return scope.name(_PRIMS[node.name])
    if isinstance(node, ir.Seq):
        if node.kind == "tuple":
            return nodes.subscript(scope.name("tuple"), [annotation(node.item, scope), cst.Ellipsis()])
        return nodes.subscript(scope.name(_SEQ[node.kind]), [annotation(node.item, scope)])
    if isinstance(node, ir.Tuple):
        items = [annotation(item, scope) for item in node.items] or [cst.Tuple([])]
        return nodes.subscript(scope.name("tuple"), items)
    if isinstance(node, ir.Dict):
        base = scope.name("_abc.Mapping" if node.mapping else "dict")
        return nodes.subscript(base, [annotation(node.key, scope), annotation(node.value, scope)])
    if isinstance(node, ir.Union):
        members = _union_members(node, scope)
        if node.discriminator is None:
            return members
        marker = nodes.call(scope.name("_rt.Discriminator"), [nodes.string(node.discriminator)])
        return nodes.subscript(scope.name("_t.Annotated"), [members, marker])
    if isinstance(node, ir.Lit):
        values: list[ir.LiteralValue] = [v for v in node.values if v is not None]
        if len(values) == len(node.values):
            return nodes.subscript(scope.name("_t.Literal"), [literal_value(v, scope) for v in values])
        # ``Literal[..., None]`` is spelled ``Literal[...] | None`` (ruff's PYI061)
        if not values:
            return cst.Name("None")
        return nodes.union([annotation(ir.Lit(values), scope), cst.Name("None")])
    if isinstance(node, ir.Ref):
        base = nodes.dotted(scope.ref(node.name))
        if not node.args:
            return base
        return nodes.subscript(base, [annotation(a, scope) for a in node.args])
    if isinstance(node, ir.Var):
        return nodes.dotted(node.name)
    if isinstance(node, ir.Json):
        # the JSON text, as the worker's pydantic reads Json[T]; the guard checks it parses
        marker = nodes.call(scope.name("_rt.JsonText"))
        return nodes.subscript(scope.name("_t.Annotated"), [scope.name("str"), marker])
    kind: str = node.type.name if isinstance(node.type, ir.Prim) else "seq"
    keys = _META_KEYS.get(kind, frozenset({"min_length", "max_length"}) if kind == "seq" else frozenset())
    given = {k: v for k, v in msgspec.structs.asdict(node.meta).items() if v is not None}
    items = [annotation(node.type, scope)]
    if any(k in keys for k in given):
        items.append(meta(ir.Constraints(**{k: v for k, v in given.items() if k in keys}), scope))
    others = {k: v for k, v in given.items() if k not in keys}
    if others:
        items.append(_checks(kind, others, scope))
    return nodes.subscript(scope.name("_t.Annotated"), items)


def _union_members(node: ir.Union, scope: Scope) -> cst.BaseExpression:
    """``A | B``, each spelling once (two str-like members both take ``str``)."""
    parts: list[cst.BaseExpression] = []
    seen: set[str] = set()
    for member in node.members:
        expr = annotation(member, scope)
        pieces = _split_union(expr)
        for piece in pieces:
            text = nodes.code(piece)
            if text not in seen:
                seen.add(text)
                parts.append(piece)
    return nodes.union(parts)


def _split_union(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.BitOr):
        return [*_split_union(expr.left), *_split_union(expr.right)]
    return [expr]


def _checks(base: str, given: dict[str, object], scope: Scope) -> cst.Call:
    """``akadze.client.Constraints(...)``: what pydantic enforces and msgspec.Meta cannot say."""
    kwargs: list[tuple[str, cst.BaseExpression]] = []
    for key, value in given.items():
        if isinstance(value, str) and key in ("gt", "ge", "lt", "le", "multiple_of"):
            if base == "timedelta":
                expr: cst.BaseExpression = nodes.call(scope.name("_dt.timedelta"), kwargs=_duration(value))
            elif base == "decimal" and value.lstrip("-").isdigit():
                expr = nodes.call(scope.name("_decimal.Decimal"), [nodes.literal(int(value))])
            else:
                expr = nodes.call(scope.name(_BOUND_EXPR.get(base, "str")), [nodes.string(value)])
        elif isinstance(value, bool | int | str):
            expr = nodes.literal(value)
        elif isinstance(value, float):
            expr = nodes.number(value)
        else:
            continue
        kwargs.append((key, expr))
    return nodes.call(scope.name("_rt.Constraints"), kwargs=kwargs)


def _duration(text: str) -> list[tuple[str, cst.BaseExpression]]:
    """A duration given in the manifest as seconds (a decimal string) as ``timedelta``
    arguments, exactly: ``days=30``, ``seconds=90``, ``microseconds=5``."""
    total = round(decimal.Decimal(text) * 10**6)
    sign = -1 if total < 0 else 1
    days, rest = divmod(abs(total), 86400 * 10**6)
    seconds, micros = divmod(rest, 10**6)
    parts = [("days", days), ("seconds", seconds), ("microseconds", micros)]
    kept = [(name, nodes.literal(sign * value)) for name, value in parts if value]
    return kept or [("seconds", nodes.literal(0))]


def literal_value(value: ir.LiteralValue, scope: Scope) -> cst.BaseExpression:
    """A Literal's value as an expression: an enum member through its mirrored class."""
    if isinstance(value, ir.EnumMember):
        return nodes.dotted(f"{scope.ref(value.enum)}.{value.member}")
    return nodes.literal(value)


def meta(constraints: ir.Constraints, scope: Scope) -> cst.Call:
    """``msgspec.Meta(...)`` of the constraints msgspec can carry (bounds, lengths, pattern, tz)."""
    kwargs: list[tuple[str, cst.BaseExpression]] = []
    for key, value in msgspec.structs.asdict(constraints).items():
        if value is None:
            continue
        if isinstance(value, str):
            kwargs.append((key, nodes.string(value)))
        elif isinstance(value, bool):
            kwargs.append((key, nodes.literal(value)))
        else:
            kwargs.append((key, nodes.number(value)))
    return nodes.call(scope.name("_msgspec.Meta"), kwargs=kwargs)


def referenced_names(node: ir.TypeNode) -> set[str]:
    """Bare names an annotation of ``node`` mentions (to find what a class field would shadow)."""
    if isinstance(node, ir.Prim):
        if node.name in _STR_LIKE:
            return {"str"} | {name.split(".", 1)[0] for name in _STR_LIKE[node.name]}
        return {_PRIMS[node.name].split(".", 1)[0]}
    if isinstance(node, ir.Seq):
        return {_SEQ.get(node.kind, "tuple").split(".", 1)[0]} | referenced_names(node.item)
    if isinstance(node, ir.Tuple):
        return {"tuple"}.union(*(referenced_names(i) for i in node.items))
    if isinstance(node, ir.Dict):
        head = "_abc" if node.mapping else "dict"
        return {head} | referenced_names(node.key) | referenced_names(node.value)
    if isinstance(node, ir.Union):
        tagged = {"_t", "_rt"} if node.discriminator is not None else set()
        return tagged.union(*(referenced_names(m) for m in node.members))
    if isinstance(node, ir.Lit):
        return {"_t"} | {v.enum for v in node.values if isinstance(v, ir.EnumMember)}
    if isinstance(node, ir.Ref):
        return {node.name}.union(*(referenced_names(a) for a in node.args))
    if isinstance(node, ir.Var):
        return {node.name}
    if isinstance(node, ir.Json):
        return {"_t", "_rt", "str"}
    return {"_t", "_msgspec", "_rt", "_dt", "_decimal"} | referenced_names(node.type)


def refs(node: ir.TypeNode) -> set[str]:
    """Mirror names that ``node`` uses."""
    if isinstance(node, ir.Ref):
        return {node.name}.union(*(refs(a) for a in node.args))
    if isinstance(node, ir.Seq):
        return refs(node.item)
    if isinstance(node, ir.Tuple):
        return set().union(*(refs(i) for i in node.items))
    if isinstance(node, ir.Dict):
        return refs(node.key) | refs(node.value)
    if isinstance(node, ir.Union):
        return set().union(*(refs(m) for m in node.members))
    if isinstance(node, ir.Lit):
        return {v.enum for v in node.values if isinstance(v, ir.EnumMember)}
    if isinstance(node, ir.Annotated):
        return refs(node.type)
    return set()
