"""IR type nodes -> libcst annotation expressions, plus the imports each one needs.

Every import is aliased with a leading underscore (``typing as _t``), so a task, parameter or
field named ``typing``, ``list`` or ``id`` cannot shadow it. A builtin that a module-level
name does shadow is spelled ``_b.list`` (``import builtins as _b``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst
import msgspec

from akadze_codegen import nodes, signature as ir

#: alias -> module, for every import generated code may need
IMPORTS: dict[str, str] = {
    "_abc": "collections.abc",
    "_b": "builtins",
    "_dt": "datetime",
    "_decimal": "decimal",
    "_enum": "enum",
    "_t": "typing",
    "_uuid": "uuid",
    "_msgspec": "msgspec",
    "_rt": "akadze.client",
}
#: aliases of the standard library (the first import group); the rest are third party
STDLIB = frozenset({"_abc", "_b", "_dt", "_decimal", "_enum", "_t", "_uuid"})

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
_BUILTINS = frozenset({"bool", "bytes", "dict", "float", "frozenset", "int", "list", "set", "str", "tuple"})
_SEQ = {"list": "list", "set": "set", "frozenset": "frozenset", "sequence": "_abc.Sequence"}


@dataclass
class Scope:
    """How names are spelled in one generated module (or class body)."""

    #: mirror name -> how this module refers to it
    ref: Callable[[str], str] = lambda name: name
    #: builtin names that something in this module shadows
    shadowed: frozenset[str] = frozenset()
    #: aliases (keys of IMPORTS) used so far
    imports: set[str] = field(default_factory=set)
    #: hoisted annotations: (alias name, its definition line(s)), in dependency order
    aliases: list[tuple[str, str]] = field(default_factory=list)
    _hoisted: dict[bytes, ir.Ref] = field(default_factory=dict)

    def hoist(self, node: ir.TypeNode) -> ir.Ref:
        """A module-level ``_AliasN: TypeAlias = <node>`` that fits on one line."""
        key = msgspec.json.encode(node)  # the same type hoisted twice is one alias
        known = self._hoisted.get(key)
        if known is not None:
            return known
        name = f"{ALIAS_PREFIX}{len(self._hoisted) + 1}"
        self._hoisted[key] = ir.Ref(name)
        head = f"{name}: _t.TypeAlias = "
        self.imports.add("_t")
        fitted = fit(node, self, nodes.LINE_LENGTH - len(head))
        self.aliases.append((name, alias_line(name, fitted, self)))
        return self._hoisted[key]

    def name(self, path: str) -> cst.Name | cst.Attribute:
        head = path.split(".", 1)[0]
        if head in IMPORTS:
            self.imports.add(head)
        elif head in _BUILTINS and head in self.shadowed:
            self.imports.add("_b")
            path = f"_b.{path}"
        return nodes.dotted(path)


def annotation(node: ir.TypeNode, scope: Scope) -> cst.BaseExpression:
    """The annotation expression of ``node`` in ``scope``."""
    if isinstance(node, ir.Prim):
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
        return nodes.union([annotation(m, scope) for m in node.members])
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
    return nodes.subscript(scope.name("_t.Annotated"), [annotation(node.type, scope), meta(node.meta, scope)])


def literal_value(value: ir.LiteralValue, scope: Scope) -> cst.BaseExpression:
    """A Literal's value as an expression: an enum member through its mirrored class."""
    if isinstance(value, ir.EnumMember):
        return nodes.dotted(f"{scope.ref(value.enum)}.{value.member}")
    return nodes.literal(value)


def meta(constraints: ir.Constraints, scope: Scope) -> cst.Call:
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
        return {_PRIMS[node.name].split(".", 1)[0]}
    if isinstance(node, ir.Seq):
        return {_SEQ.get(node.kind, "tuple").split(".", 1)[0]} | referenced_names(node.item)
    if isinstance(node, ir.Tuple):
        return {"tuple"}.union(*(referenced_names(i) for i in node.items))
    if isinstance(node, ir.Dict):
        head = "_abc" if node.mapping else "dict"
        return {head} | referenced_names(node.key) | referenced_names(node.value)
    if isinstance(node, ir.Union):
        return set().union(*(referenced_names(m) for m in node.members))
    if isinstance(node, ir.Lit):
        return {"_t"} | {v.enum for v in node.values if isinstance(v, ir.EnumMember)}
    if isinstance(node, ir.Ref):
        return {node.name}.union(*(referenced_names(a) for a in node.args))
    if isinstance(node, ir.Var):
        return {node.name}
    return {"_t", "_msgspec"} | referenced_names(node.type)


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


def field_annotation(node: ir.TypeNode, scope: Scope, prefix: str, suffix: str = "", wrap: str = "") -> str:
    """The annotation text for a line ``prefix + annotation + suffix`` that fits: ``wrap`` is an
    outer ``X[...]`` (NotRequired) that cannot go into an alias."""
    extra = len(wrap) + 2 if wrap else 0
    budget = nodes.LINE_LENGTH - len(prefix) - len(suffix) - extra
    fitted = fit(node, scope, budget)
    if _width(fitted, scope) > budget and _children(fitted):
        fitted = scope.hoist(fitted)
    text = nodes.code(annotation(fitted, scope))
    return f"{wrap}[{text}]" if wrap else text


def fit(node: ir.TypeNode, scope: Scope, budget: int) -> ir.TypeNode:
    """``node`` with its largest parts hoisted into module-level aliases until its annotation
    fits in ``budget`` columns. Keeping every line within ruff's default length is what makes
    the output formatter-stable; ruff's own ways of splitting long annotations are not."""
    if _width(node, scope) <= budget:
        return node
    current = node
    children = _children(node)
    for index in sorted(range(len(children)), key=lambda i: -_width(children[i], scope)):
        if _width(current, scope) <= budget:
            return current
        if _children(children[index]) or isinstance(children[index], ir.Lit):
            current = _with_child(current, index, scope.hoist(children[index]))
    if _width(current, scope) <= budget:
        return current
    if isinstance(current, ir.Union) and len(current.members) > 2:
        half = len(current.members) // 2
        first, second = ir.Union(current.members[:half]), ir.Union(current.members[half:])
        return fit(ir.Union([scope.hoist(first), scope.hoist(second)]), scope, budget)
    return current


def alias_line(name: str, node: ir.TypeNode, scope: Scope) -> str:
    """``name: _t.TypeAlias = <node>``, exploded with a magic trailing comma when too long."""
    head = f"{name}: _t.TypeAlias = "
    text = nodes.code(annotation(node, scope))
    if nodes.fits(head + text) or not isinstance(node, ir.Lit | ir.Tuple | ir.Dict | ir.Ref):
        return head + text
    base = text[: text.index("[")]
    if isinstance(node, ir.Lit):
        items = [nodes.code(literal_value(v, scope)) for v in node.values]
    else:
        items = [nodes.code(annotation(child, scope)) for child in _children(node)]
    return nodes.exploded(f"{head}{base}[", items, "]")


#: hoisted annotations are named _Alias1, _Alias2, ... in the order they are made
ALIAS_PREFIX = "_Alias"


def _width(node: ir.TypeNode, scope: Scope) -> int:
    return len(nodes.code(annotation(node, scope)))


def _children(node: ir.TypeNode) -> list[ir.TypeNode]:
    if isinstance(node, ir.Seq):
        return [node.item]
    if isinstance(node, ir.Tuple):
        return list(node.items)
    if isinstance(node, ir.Dict):
        return [node.key, node.value]
    if isinstance(node, ir.Union):
        return list(node.members)
    if isinstance(node, ir.Ref):
        return list(node.args)
    if isinstance(node, ir.Annotated):
        return [node.type]
    return []


def _with_child(node: ir.TypeNode, index: int, child: ir.TypeNode) -> ir.TypeNode:
    children = _children(node)
    children[index] = child
    if isinstance(node, ir.Seq):
        return ir.Seq(node.kind, children[0])
    if isinstance(node, ir.Tuple):
        return ir.Tuple(children)
    if isinstance(node, ir.Dict):
        return ir.Dict(children[0], children[1], node.mapping)
    if isinstance(node, ir.Union):
        return ir.Union(children)
    if isinstance(node, ir.Ref):
        return ir.Ref(node.name, children)
    if isinstance(node, ir.Annotated):
        return ir.Annotated(children[0], node.meta)
    return node
