"""Structural comparison of two manifests' types, for ``akadze codegen diff``.

Answers one question per place in the arguments: can a producer that sends values of the old
type still send them to a worker that takes the new one? Types are compared by structure, not
by name (a mirror renamed in Python but identical on the wire is no change); unions are
flattened, NewTypes unwrapped, generic definitions bound to their arguments, recursion cut.
"""

from __future__ import annotations

import decimal
from collections.abc import Iterable, Sequence

import msgspec

from akadze_codegen import signature as ir
from akadze_codegen.changes import Change, Verdict, requirement_changed

_NUMBERS = {"int": 0, "float": 1, "decimal": 1}
#: names of types that are a JSON string the worker parses (ir.PrimName)
_STRINGS = frozenset(
    {"str", "path", "ipv4address", "ipv6address", "ipaddress", "ipv4network", "ipv6network", "ipnetwork"}
    | {"ipv4interface", "ipv6interface", "ipinterface"}
)
_LOWER = ("gt", "ge", "min_length")
_UPPER = ("lt", "le", "max_length", "max_digits", "decimal_places")
_EXACT = ("multiple_of", "pattern", "tz")

#: a literal's wire value, kept apart by kind so that True and 1 differ
_Value = tuple[str, str | int | bool | None]
#: one member of a flattened type, with the constraints it carries
_Member = tuple[ir.TypeNode, ir.Constraints | None]


class TypeComparison:
    """Compares type nodes of an old manifest with those of a new one (definitions by name)."""

    def __init__(self, old: ir.Manifest, new: ir.Manifest) -> None:
        self.defs = (
            {d.name: d for d in old.types},
            {d.name: d for d in new.types},
        )
        self._stack: set[tuple[bytes, bytes]] = set()

    def compare(self, old: ir.TypeNode, new: ir.TypeNode, where: str, path: str) -> list[Change]:
        """Changes that matter to a producer sending values of ``old`` to a worker taking ``new``.

        ``where`` renders as ``task(path)``; ``path`` is the part in parentheses."""
        task = where.partition("(")[0]
        olds, news = self._members(old, 0), self._members(new, 1)
        if any(isinstance(n, ir.Prim) and n.name == "any" for n, _ in news):
            if all(isinstance(o, ir.Prim) and o.name == "any" for o, _ in olds):
                return []
            return [Change("safe", where, f"type widened: {describe(old)} -> Any", topic="type")]
        changes: list[Change] = []
        new_others = [m for m in news if not isinstance(m[0], ir.Lit)]
        old_others = [m for m in olds if not isinstance(m[0], ir.Lit)]
        old_literals, new_literals = self._values(olds, 0, enums=False), self._values(news, 1, enums=False)
        for value in sorted(old_literals - self._values(news, 1), key=repr):
            if not any(_accepts(n, value) for n, _ in new_others):
                changes.append(
                    Change(
                        "breaking",
                        where,
                        f"literal value removed: {_show(value)}",
                        topic=f"value {_show(value)}",
                    )
                )
        for value in sorted(new_literals - self._values(olds, 0), key=repr):
            if not any(_accepts(o, value) for o, _ in old_others):
                changes.append(
                    Change(
                        "safe", where, f"literal value added: {_show(value)}", topic=f"value {_show(value)}"
                    )
                )
        used: set[int] = set()
        for member in old_others:
            best: tuple[int, list[Change]] | None = None
            for i, candidate in enumerate(new_others):
                if self._family(member[0], 0) != self._family(candidate[0], 1):
                    continue
                found = self.pair(member, candidate, where, path, task)
                breaking = sum(c.verdict == "breaking" for c in found)
                if best is None or breaking < sum(c.verdict == "breaking" for c in best[1]):
                    best = (i, found)
                if not breaking:
                    break
            if best is not None:
                used.add(best[0])
                changes.extend(best[1])
            elif not self._covered(member[0], news, 0):
                single = len(olds) == 1 and len(news) == 1
                was_any = isinstance(member[0], ir.Prim) and member[0].name == "any"
                text = (
                    f"type changed: {describe(old)} -> {describe(new)}"
                    if single and not was_any
                    else f"type narrowed: {describe(member[0])} no longer accepted "
                    f"({describe(old)} -> {describe(new)})"
                )
                topic = "type" if single else f"member {describe(member[0])}"
                changes.append(Change("breaking", where, text, topic=topic))
                if single:  # the one new type is this change's other side, not a widening
                    used.add(0)
        for i, (node, _) in enumerate(new_others):
            if i not in used and not self._covered(node, olds, 1):
                changes.append(
                    Change(
                        "safe",
                        where,
                        f"union widened: now also accepts {describe(node)}",
                        topic=f"member {describe(node)}",
                    )
                )
        return changes

    def pair(self, old: _Member, new: _Member, where: str, path: str, task: str) -> list[Change]:
        """Changes between one old union member and the new member it is matched with."""
        (o, om), (n, nm) = old, new
        changes = _constraints(om, nm, where)
        if isinstance(o, ir.Prim) and isinstance(n, ir.Prim):
            # a manifest from before IP addresses and paths had their own names said "str"
            respelled = "str" in (o.name, n.name) and {o.name, n.name} <= _STRINGS
            if o.name != n.name and not respelled:
                widened = o.name in _NUMBERS and _NUMBERS[o.name] < _NUMBERS.get(n.name, -1)
                verdict: Verdict = "safe" if widened else "breaking"
                label = "widened" if widened else "changed"
                changes.append(
                    Change(verdict, where, f"type {label}: {describe(o)} -> {describe(n)}", topic="type")
                )
        elif isinstance(o, ir.Seq | ir.Tuple) and isinstance(n, ir.Seq | ir.Tuple):
            changes.extend(self._arrays(o, n, where, path, task))
        elif isinstance(o, ir.Dict) and isinstance(n, ir.Dict):
            changes.extend(self._nested(o.key, n.key, task, f"{path}[key]"))
            changes.extend(self._nested(o.value, n.value, task, f"{path}[value]"))
        elif isinstance(o, ir.Ref) and isinstance(n, ir.Ref):
            key = (msgspec.json.encode(o), msgspec.json.encode(n))
            if key in self._stack:  # recursion: compared on the way in
                return changes
            self._stack.add(key)
            try:
                changes.extend(self._definitions(o, n, where, path, task))
            finally:
                self._stack.discard(key)
        elif isinstance(o, ir.Var) and isinstance(n, ir.Var):
            if o.name != n.name:
                changes.append(Change("breaking", where, f"type changed: {o.name} -> {n.name}", topic="type"))
        else:
            changes.append(
                Change("breaking", where, f"type changed: {describe(o)} -> {describe(n)}", topic="type")
            )
        return changes

    def _nested(self, old: ir.TypeNode, new: ir.TypeNode, task: str, path: str) -> list[Change]:
        return self.compare(old, new, f"{task}({path})", path)

    def _arrays(
        self, o: ir.Seq | ir.Tuple, n: ir.Seq | ir.Tuple, where: str, path: str, task: str
    ) -> list[Change]:
        if isinstance(o, ir.Seq) and isinstance(n, ir.Seq):
            changes = self._nested(o.item, n.item, task, f"{path}[*]")
            if o.kind != n.kind:
                text = f"container {o.kind} -> {n.kind} (the same JSON array on the wire)"
                changes.insert(0, Change("safe", where, text, topic="container"))
            return changes
        if isinstance(o, ir.Tuple) and isinstance(n, ir.Tuple):
            if len(o.items) != len(n.items):
                return [
                    Change("breaking", where, f"tuple length {len(o.items)} -> {len(n.items)}", topic="type")
                ]
            return [
                c
                for i, (a, b) in enumerate(zip(o.items, n.items, strict=True))
                for c in self._nested(a, b, task, f"{path}[{i}]")
            ]
        if isinstance(o, ir.Tuple) and isinstance(n, ir.Seq):
            found = [c for a in o.items for c in self._nested(a, n.item, task, f"{path}[*]")]
            return found or [
                Change("safe", where, f"type widened: {describe(o)} -> {describe(n)}", topic="type")
            ]
        return [Change("breaking", where, f"type narrowed: {describe(o)} -> {describe(n)}", topic="type")]

    def _definitions(self, o: ir.Ref, n: ir.Ref, where: str, path: str, task: str) -> list[Change]:
        od, nd = self.defs[0].get(o.name), self.defs[1].get(n.name)
        if od is None or nd is None:
            missing = o.name if od is None else n.name
            return [
                Change("breaking", where, f"type {missing!r} is not defined in the manifest", topic="type")
            ]
        if isinstance(od, ir.EnumDef) and isinstance(nd, ir.EnumDef):
            before = {_value(v): name for name, v in od.members}
            after = {_value(v): name for name, v in nd.members}
            removed = sorted(set(before) - set(after), key=repr)
            added = sorted(set(after) - set(before), key=repr)
            return [_enum_value("breaking", "removed", where, od.name, before[v], v) for v in removed] + [
                _enum_value("safe", "added", where, nd.name, after[v], v) for v in added
            ]
        if isinstance(od, ir.NamedTupleDef) and isinstance(nd, ir.NamedTupleDef):
            if len(od.fields) != len(nd.fields):
                text = f"NamedTuple {len(od.fields)} -> {len(nd.fields)} items (an array on the wire)"
                return [Change("breaking", where, text, topic="type")]
            return [
                c
                for a, b in zip(od.fields, nd.fields, strict=True)
                for c in self._nested(a.type, b.type, task, f"{path}.{a.name}")
            ]
        if isinstance(od, ir.StructDef | ir.TypedDictDef) and isinstance(nd, ir.StructDef | ir.TypedDictDef):
            return self._fields(_bound(od, o), _bound(nd, n), path, task)
        return [Change("breaking", where, f"type changed: {describe(o)} -> {describe(n)}", topic="type")]

    def _fields(self, old: Sequence[ir.Field], new: Sequence[ir.Field], path: str, task: str) -> list[Change]:
        changes: list[Change] = []
        by_wire = {f.wire: f for f in new}
        by_name = {f.name: f for f in new}
        matched: set[str] = set()
        for f in old:
            g = by_wire.get(f.wire)
            where = f"{task}({path}.{f.wire})"
            if g is None:
                g = by_name.get(f.name)
                if g is None or g.wire in {x.wire for x in old}:
                    text = "field removed (old producers still send it)"
                    changes.append(Change("breaking", where, text, topic="field"))
                    continue
                text = f"wire name changed: {f.wire!r} -> {g.wire!r}"
                changes.append(Change("breaking", where, text, "in steps", topic="wire"))
            matched.add(g.wire)
            changes.extend(requirement_changed(where, "field", f, g))
            changes.extend(self._nested(f.type, g.type, task, f"{path}.{f.wire}"))
        for g in new:
            if g.wire not in matched:
                kind = "required" if g.required else "optional"
                verdict: Verdict = "breaking" if g.required else "safe"
                where = f"{task}({path}.{g.wire})"
                changes.append(
                    Change(verdict, where, f"new {kind} field ({describe(g.type)})", topic="field")
                )
        return changes

    # -- helpers --------------------------------------------------------------------------------

    def _members(self, node: ir.TypeNode, side: int) -> list[_Member]:
        """A union flattened; NewTypes unwrapped; Annotated constraints kept beside the type."""
        if isinstance(node, ir.Union):
            return [m for member in node.members for m in self._members(member, side)]
        if isinstance(node, ir.Annotated):
            return [(n, m or node.meta) for n, m in self._members(node.type, side)]
        if isinstance(node, ir.Ref):
            definition = self.defs[side].get(node.name)
            if isinstance(definition, ir.NewTypeDef):
                return self._members(definition.type, side)
        return [(node, None)]

    def _values(self, members: Iterable[_Member], side: int, *, enums: bool = True) -> set[_Value]:
        """The literal values a type takes (and its enums' values unless ``enums`` is False)."""
        values: set[_Value] = set()
        for node, _ in members:
            if isinstance(node, ir.Lit):
                for v in node.values:
                    if isinstance(v, ir.EnumMember):
                        enum = self.defs[side].get(v.enum)
                        if isinstance(enum, ir.EnumDef):
                            values.add(_value(dict(enum.members)[v.member]))
                    else:
                        values.add(_value(v))
            elif isinstance(node, ir.Ref) and enums:
                definition = self.defs[side].get(node.name)
                if isinstance(definition, ir.EnumDef):
                    values.update(_value(v) for _, v in definition.members)
        return values

    def _family(self, node: ir.TypeNode, side: int) -> str:
        if isinstance(node, ir.Prim):
            return "number" if node.name in _NUMBERS else "str" if node.name in _STRINGS else node.name
        if isinstance(node, ir.Seq | ir.Tuple):
            return "array"
        if isinstance(node, ir.Dict):
            return "object"
        if isinstance(node, ir.Ref):
            definition = self.defs[side].get(node.name)
            if isinstance(definition, ir.NamedTupleDef):
                return "array"
            if isinstance(definition, ir.EnumDef):
                return "enum"
            return "object"
        return type(node).__name__

    def _covered(self, node: ir.TypeNode, other: Sequence[_Member], side: int) -> bool:
        """An enum (of side ``side``) whose every value the other side's type takes too, as
        literals or plain types: the change is in the spelling, not on the wire."""
        if isinstance(node, ir.Ref):
            definition = self.defs[side].get(node.name)
            if isinstance(definition, ir.EnumDef):
                values = {_value(v) for _, v in definition.members}
                known = self._values(other, 1 - side)
                return all(v in known or any(_accepts(n, v) for n, _ in other) for v in values)
        return False


def _enum_value(verdict: Verdict, how: str, where: str, enum: str, member: str, value: _Value) -> Change:
    return Change(
        verdict, where, f"enum value {how}: {enum}.{member} = {_show(value)}", topic=f"value {_show(value)}"
    )


def _bound(definition: ir.StructDef | ir.TypedDictDef, ref: ir.Ref) -> list[ir.Field]:
    """The fields with the reference's type arguments put in for the type parameters."""
    params = definition.type_params if isinstance(definition, ir.StructDef) else []
    if not params or not ref.args:
        return list(definition.fields)
    env = dict(zip(params, ref.args, strict=False))
    return [msgspec.structs.replace(f, type=_subst(f.type, env)) for f in definition.fields]


def _subst(node: ir.TypeNode, env: dict[str, ir.TypeNode]) -> ir.TypeNode:
    if isinstance(node, ir.Var):
        return env.get(node.name, node)
    return ir.map_children(node, lambda child: _subst(child, env))


def _value(v: str | int | bool | None) -> _Value:
    kind = "none" if v is None else "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "str"
    return (kind, v)


def _show(value: _Value) -> str:
    return repr(value[1])


def _accepts(node: ir.TypeNode, value: _Value) -> bool:
    """A plain type that takes a literal value (``str`` takes ``'a'``)."""
    if not isinstance(node, ir.Prim):
        return False
    kind = value[0]
    return node.name == kind or (kind == "int" and node.name in ("float", "decimal"))


def _constraints(old: ir.Constraints | None, new: ir.Constraints | None, where: str) -> list[Change]:
    o, n = old or ir.Constraints(), new or ir.Constraints()
    changes: list[Change] = []
    for key in (*_LOWER, *_UPPER, *_EXACT):
        a, b = getattr(o, key), getattr(n, key)
        if a == b:
            continue
        if a is None:
            changes.append(Change("breaking", where, f"constraint added: {key}={b!r}", topic=key))
        elif b is None:
            changes.append(Change("safe", where, f"constraint removed: {key}={a!r}", topic=key))
        elif key in _EXACT:
            changes.append(Change("breaking", where, f"constraint changed: {key} {a!r} -> {b!r}", topic=key))
        else:
            ob, oa = _order(b), _order(a)
            if type(ob) is not type(oa):
                ob, oa = str(b), str(a)
            tighter = ob > oa if key in _LOWER else ob < oa  # type: ignore[operator]
            verdict: Verdict = "breaking" if tighter else "safe"
            label = "tightened" if tighter else "loosened"
            changes.append(Change(verdict, where, f"constraint {label}: {key} {a!r} -> {b!r}", topic=key))
    return changes


def _order(bound: object) -> decimal.Decimal | str:
    """A bound as a comparable value: numbers and the manifest's decimal strings (a Decimal's
    bound, a duration's seconds) as Decimals; ISO dates and times as their text."""
    try:
        return decimal.Decimal(str(bound))
    except decimal.InvalidOperation:
        return str(bound)


def describe(node: ir.TypeNode) -> str:
    """A short, Python-like spelling of a type node, for messages."""
    if isinstance(node, ir.Prim):
        return {"none": "None", "any": "Any"}.get(node.name, node.name)
    if isinstance(node, ir.Seq):
        return (
            f"tuple[{describe(node.item)}, ...]"
            if node.kind == "tuple"
            else f"{node.kind}[{describe(node.item)}]"
        )
    if isinstance(node, ir.Tuple):
        return f"tuple[{', '.join(describe(i) for i in node.items)}]"
    if isinstance(node, ir.Dict):
        return f"dict[{describe(node.key)}, {describe(node.value)}]"
    if isinstance(node, ir.Union):
        return " | ".join(describe(m) for m in node.members)
    if isinstance(node, ir.Lit):
        shown = [f"{v.enum}.{v.member}" if isinstance(v, ir.EnumMember) else repr(v) for v in node.values]
        return f"Literal[{', '.join(shown)}]"
    if isinstance(node, ir.Ref):
        return f"{node.name}[{', '.join(describe(a) for a in node.args)}]" if node.args else node.name
    if isinstance(node, ir.Var):
        return node.name
    return describe(node.type)
