"""Small libcst builders: names, strings, subscripts, calls and statements, laid out as ruff would.

libcst prints exactly the nodes it is given, so the layout (one-line when it fits in
:data:`LINE_LENGTH`, exploded with a magic trailing comma otherwise) is decided here and the
output is stable under ``ruff format`` without running a formatter.
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

#: ruff's default line length; output fitting in it is stable under any longer setting
LINE_LENGTH = 88
INDENT = "    "

_EMPTY_MODULE = cst.Module(body=[])


def code(node: cst.CSTNode) -> str:
    """The source text of one node."""
    return _EMPTY_MODULE.code_for_node(node)


def dotted(path: str) -> cst.Name | cst.Attribute:
    """``"_t.Final"`` -> Attribute(Name("_t"), Name("Final"))."""
    head, *rest = path.split(".")
    node: cst.Name | cst.Attribute = cst.Name(head)
    for part in rest:
        node = cst.Attribute(value=node, attr=cst.Name(part))
    return node


def string(value: str) -> cst.SimpleString:
    """A string literal quoted the way ruff prefers: double quotes unless that adds escapes."""
    text = repr(value)
    if text.startswith("'") and '"' not in value:
        text = '"' + text[1:-1].replace("\\'", "'") + '"'
    return cst.SimpleString(text)


def literal(value: str | int | bool | None) -> cst.BaseExpression:
    """A str, int, bool or None literal (a negative int as a unary minus)."""
    if value is None or isinstance(value, bool):
        return cst.Name(repr(value))
    if isinstance(value, int):
        if value < 0:
            return cst.UnaryOperation(cst.Minus(), cst.Integer(str(-value)))
        return cst.Integer(str(value))
    return string(value)


def number(value: int | float) -> cst.BaseExpression:
    """An int or float literal, ``inf`` as a name."""
    if isinstance(value, int):
        return literal(value)
    text = repr(abs(value))
    node: cst.BaseExpression = cst.Float(text) if "inf" not in text else cst.Name("inf")
    return cst.UnaryOperation(cst.Minus(), node) if value < 0 else node


def subscript(base: cst.BaseExpression, items: Sequence[cst.BaseExpression]) -> cst.Subscript:
    """``base[a, b]``."""
    elements = [
        cst.SubscriptElement(
            cst.Index(item),
            comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            if i < len(items) - 1
            else cst.MaybeSentinel.DEFAULT,
        )
        for i, item in enumerate(items)
    ]
    return cst.Subscript(value=base, slice=elements)


def union(members: Sequence[cst.BaseExpression]) -> cst.BaseExpression:
    """``a | b | c``."""
    node = members[0]
    for member in members[1:]:
        node = cst.BinaryOperation(
            left=node,
            operator=cst.BitOr(
                whitespace_before=cst.SimpleWhitespace(" "),
                whitespace_after=cst.SimpleWhitespace(" "),
            ),
            right=member,
        )
    return node


def call(
    func: cst.BaseExpression,
    args: Sequence[cst.BaseExpression] = (),
    kwargs: Sequence[tuple[str, cst.BaseExpression]] = (),
) -> cst.Call:
    """A one-line call ``func(a, b, k=v)``."""
    items = [cst.Arg(a) for a in args] + [
        cst.Arg(
            value,
            keyword=cst.Name(key),
            equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""),
                whitespace_after=cst.SimpleWhitespace(""),
            ),
        )
        for key, value in kwargs
    ]
    with_commas = [
        arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        if i < len(items) - 1
        else arg
        for i, arg in enumerate(items)
    ]
    return cst.Call(func=func, args=with_commas)


def exploded(opening: str, items: Sequence[str], closing: str, indent: str = "") -> str:
    """One item per line with a magic trailing comma, which ruff keeps exploded."""
    inner = "".join(f"{indent}{INDENT}{item},\n" for item in items)
    return f"{indent}{opening}\n{inner}{indent}{closing}"


def fits(line: str) -> bool:
    """Whether ``line`` fits in :data:`LINE_LENGTH`."""
    return len(line) <= LINE_LENGTH
