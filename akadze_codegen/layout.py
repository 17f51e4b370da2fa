"""How generated annotations fit ruff's line length: the :class:`Scope` a module's names are
spelled in, the module-level aliases long annotations are hoisted into (named after what they
type), and the shortening of those names where a long task or field name leaves no room.

Keeping every line within 88 columns is what makes the output formatter-stable without running
a formatter (annotations.py decides what an annotation says; this module only lays it out).
"""

from __future__ import annotations

import keyword
from collections.abc import Callable
from dataclasses import dataclass, field

import libcst as cst
import msgspec

from akadze_codegen import nodes, signature as ir
from akadze_codegen.annotations import BUILTINS, IMPORTS, annotation


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
    #: names the module defines or imports otherwise, which an alias must not take
    taken: set[str] = field(default_factory=set)
    #: the longest alias name (emit tries shorter ones while a line does not fit)
    name_limit: int = 30

    def hoist(self, node: ir.TypeNode, hint: str = "", limit: int = 0) -> ir.Ref:
        """A module-level ``Name: TypeAlias = <node>`` that fits on one line, named after what
        it types (``hint``: ``PaymentsPayAmount`` for the parameter ``amount`` of the task
        ``payments.pay``, ``PriceAmount`` for the field ``amount`` of ``Price``; a part of one
        gets a suffix: ``...Item``, ``...Key``, ``...Value``, ``...Choice2``); at most ``limit``
        characters where the place it is used has no more room."""
        key = msgspec.json.encode(node)  # the same type hoisted twice is one alias
        known = self._hoisted.get(key)
        if known is not None:
            return known
        name = base = _alias_name(hint, min(limit, self.name_limit) if limit > 0 else self.name_limit)
        n = 1
        while name in self.taken or keyword.iskeyword(name):
            n += 1
            name = f"{base}{n}"
        self.taken.add(name)
        self._hoisted[key] = ir.Ref(name)
        head = f"{name}: _t.TypeAlias = "
        self.imports.add("_t")
        fitted = fit(node, self, nodes.LINE_LENGTH - len(head), hint or name)
        self.aliases.append((name, alias_line(name, fitted, self)))
        return self._hoisted[key]

    def name(self, path: str) -> cst.Name | cst.Attribute:
        """The expression for ``path`` (``_t.Any``, ``list``), recording the import it
        needs; a shadowed builtin goes through ``_b``."""
        head = path.split(".", 1)[0]
        if head in IMPORTS:
            self.imports.add(head)
        elif head in BUILTINS and head in self.shadowed:
            self.imports.add("_b")
            path = f"_b.{path}"
        return nodes.dotted(path)


def field_annotation(
    node: ir.TypeNode, scope: Scope, prefix: str, suffix: str = "", wrap: str = "", hint: str = ""
) -> str:
    """The annotation text for a line ``prefix + annotation + suffix`` that fits: ``wrap`` is an
    outer ``X[...]`` (NotRequired) that cannot go into an alias; ``hint`` names the aliases."""
    extra = len(wrap) + 2 if wrap else 0
    budget = nodes.LINE_LENGTH - len(prefix) - len(suffix) - extra
    fitted = fit(node, scope, budget, hint)
    if _width(fitted, scope) > budget and _children(fitted):
        fitted = scope.hoist(fitted, hint, budget - 2)
    text = nodes.code(annotation(fitted, scope))
    return f"{wrap}[{text}]" if wrap else text


def fit(node: ir.TypeNode, scope: Scope, budget: int, hint: str = "") -> ir.TypeNode:
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
            room = budget - (_width(current, scope) - _width(children[index], scope)) - 2
            part = scope.hoist(children[index], f"{hint}|{_part_name(node, index)}", room)
            current = _with_child(current, index, part)
    if _width(current, scope) <= budget:
        return current
    if isinstance(current, ir.Union) and len(current.members) > 2 and current.discriminator is None:
        half = len(current.members) // 2
        first, second = ir.Union(current.members[:half]), ir.Union(current.members[half:])
        halves: list[ir.TypeNode] = [scope.hoist(first, f"{hint}|First"), scope.hoist(second, f"{hint}|Rest")]
        return fit(ir.Union(halves), scope, budget, hint)
    return current


def _part_name(node: ir.TypeNode, index: int) -> str:
    """What a hoisted part of ``node`` is called after the whole: ``Item``, ``Key``, ..."""
    if isinstance(node, ir.Seq):
        return "Item"
    if isinstance(node, ir.Dict):
        return ("Key", "Value")[index]
    if isinstance(node, ir.Tuple):
        return f"Item{index + 1}"
    if isinstance(node, ir.Union):
        optional = (ir.Prim("none"), ir.Ref("_msgspec.UnsetType"))
        others = [m for i, m in enumerate(node.members) if i != index]
        return "" if all(m in optional for m in others) else f"Choice{index + 1}"
    if isinstance(node, ir.Ref):
        return f"Arg{index + 1}"
    return "Base"


#: the longest alias names tried, longest first: a module is rendered with the first that keeps
#: every line within ruff's default length (a long name makes the lines that use it longer)
ALIAS_NAME_LIMITS = (30, 20, 12, 6)


def alias_hint(owner: str, name: str) -> str:
    """``("PaymentsPay", "amount")`` -> ``PaymentsPay|Amount``: the owner (a task's class, a
    mirror) and the CamelCase of the field, apart for :func:`_alias_name`."""
    return owner + "|" + "".join(p[:1].upper() + p[1:] for p in name.split("_") if p)


def _alias_name(hint: str, limit: int = ALIAS_NAME_LIMITS[0]) -> str:
    """``PaymentsPay|Amount|Item`` -> ``PaymentsPayAmountItem``; when that is too long (an
    alias's name makes its own definition line longer), ``AmountItem``, then the field's part
    cut short before its suffixes."""
    owner, field, *suffixes = [*hint.split("|"), ""] if "|" in hint else ["", hint or "Alias"]
    tail = "".join(suffixes)
    limit = max(limit, 6)
    for name in (owner + field + tail, field + tail):
        if name and len(name) <= limit:
            return name
    if len(tail) > limit - 4:
        tail = ""
    return (field or owner)[: limit - len(tail)] + tail


def alias_line(name: str, node: ir.TypeNode, scope: Scope) -> str:
    """``name: _t.TypeAlias = <node>``, exploded with a magic trailing comma when too long."""
    head = f"{name}: _t.TypeAlias = "
    expr = annotation(node, scope)
    text = nodes.code(expr)
    if nodes.fits(head + text):
        return head + text
    if not isinstance(expr, cst.Subscript) or len(expr.slice) < 2:
        return head + text  # ruff joins a one-item subscript at a longer line length
    base = nodes.code(expr.value)
    items = [
        nodes.code(element.slice.value) for element in expr.slice if isinstance(element.slice, cst.Index)
    ]
    return nodes.exploded(f"{head}{base}[", items, "]")


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
        return ir.Union(children, node.discriminator)
    if isinstance(node, ir.Ref):
        return ir.Ref(node.name, children)
    if isinstance(node, ir.Annotated):
        return ir.Annotated(children[0], node.meta)
    return node
