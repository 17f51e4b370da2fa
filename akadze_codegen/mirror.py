"""Python types -> manifest type nodes and mirror definitions (the walk discovery does).

Reads the live objects: pydantic ``model_fields`` (aliases after alias generators,
inheritance, generics), dataclass fields (``InitVar`` kept, ``init=False`` and ``ClassVar``
skipped), TypedDict and NamedTuple fields, enum members, NewTypes and aliases. What cannot be
mirrored faithfully becomes a CodegenProblem with a fix; the walk goes on to find the rest.

The walk is here (Walker); the tables of known types are in typetables, the builders of class
definitions in definitions, and the naming of mirrors in mirror_names.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import typing
from collections.abc import Callable, Iterable
from typing import Any

import msgspec
import pydantic
import typing_extensions

from akadze.task import Task
from akadze_codegen import definitions, signature as ir
from akadze_codegen.mirror_names import mirror_names, rename, rename_definition
from akadze_codegen.problems import CodegenProblem
from akadze_codegen.typetables import (
    ALIAS_TYPES,
    AS_STR,
    FIX_UNSUPPORTED,
    MAPPINGS,
    OVERRIDE_TARGETS,
    PRIMS,
    RELATIVE_TIME,
    SEQUENCES,
    STR_LIKE,
    TZ,
    UNION_ORIGINS,
    alias_value,
    bound,
    collect_constraints,
    constraint_names,
    default_text,
    describe,
    discriminator,
    lookup,
    typeddict_required,
    typevar_name,
    validator_notes,
)

__all__ = ["OVERRIDE_TARGETS", "Walker", "rename"]

#: builds one definition: (walker, the class or NewType, its key, where it was met)
Builder = Callable[["Walker", Any, str, str], ir.Definition]


class Walker:
    """Python types -> IR type nodes and definitions, keyed by the class objects they mirror."""

    def __init__(self, overrides: dict[str, str]) -> None:
        self.overrides = overrides
        self.problems: list[CodegenProblem] = []
        #: class object -> its definition key ("module:qualname", made unique)
        self._keys: dict[Any, str] = {}
        self._definitions: dict[str, ir.Definition | None] = {}
        self._short: dict[str, str] = {}
        self._module: dict[str, str] = {}
        self._aliases: list[Any] = []
        self.renames: dict[str, str] = {}
        #: what the worker checks that no client can, met while walking the current field
        self.notes: list[str] = []

    def problem(self, where: str, message: str, fix: str = "") -> ir.Prim:
        """Record a problem (the walk goes on) and stand ``Any`` in for the type."""
        self.problems.append(CodegenProblem(where, message, fix))
        return ir.Prim("any")

    # -- tasks -----------------------------------------------------------------------------

    def params(self, task: Task[Any, Any]) -> list[ir.Param]:
        """The task's parameters as its codec validates them (its argument TypedDict), less
        the arguments a ``functools.partial`` binds by keyword (dependencies, not inputs)."""
        signature = task.codec.signature
        bound = partial_keywords(task.fn)
        typed_dict = getattr(task.codec.adapter, "_type", None)
        source = typed_dict if typing_extensions.is_typeddict(typed_dict) else task.fn
        try:
            hints = typing.get_type_hints(source, include_extras=True)
        except Exception as exc:  # NameError from TYPE_CHECKING-only imports, and others
            self.problem(
                task.name,
                f"cannot resolve the argument types ({type(exc).__name__}: {exc})",
                "import the types the signature names at module level, not under TYPE_CHECKING",
            )
            return []
        params: list[ir.Param] = []
        for param in signature.parameters.values():
            if source is typed_dict and param.name not in hints:
                continue  # not an argument of the job (the codec left it out)
            if param.name in bound:
                continue  # bound by the worker: the producer has no say in it
            where = f"{task.name}({param.name})"
            if param.annotation is inspect.Parameter.empty:
                self.problem(
                    where,
                    "the parameter has no annotation, so producers could pass anything",
                    f"annotate it (write `{param.name}: typing.Any` to accept any JSON value)",
                )
                continue
            hint = hints.get(param.name, Any)
            if source is typed_dict:
                required = typeddict_required(typed_dict, param.name, hint)
            else:
                required = param.default is inspect.Parameter.empty
            node, checks = self.noted(hint, where)
            params.append(
                ir.Param(
                    name=param.name,
                    type=node,
                    required=required,
                    default=None if required else default_text(param.default, None),
                    checks=checks,
                )
            )
        return params

    def noted(self, tp: Any, where: str, checks: Iterable[str] = ()) -> tuple[ir.TypeNode, list[str]]:
        """The node of ``tp`` and what the worker checks in it that no client can (validators,
        a date that must be in the future), ``checks`` first: the notes of one field."""
        outer, self.notes = self.notes, list(checks)
        try:
            node = self.walk(tp, where)
            return node, list(dict.fromkeys(self.notes))
        finally:
            self.notes = outer

    # -- types -----------------------------------------------------------------------------

    def walk(self, tp: Any, where: str) -> ir.TypeNode:
        """The IR node of the annotation ``tp`` met at ``where``; problems are recorded, not raised."""
        if tp is Any or tp is object:
            return ir.Prim("any")
        if tp is None or tp is type(None):
            return ir.Prim("none")
        override = self._override(tp)
        if override is not None:
            return override
        prim = lookup(PRIMS, tp)
        if prim is not None:
            return ir.Prim(prim)
        tz = lookup(TZ, tp)
        if tz is not None:
            return ir.Annotated(ir.Prim("datetime"), ir.Constraints(tz=tz))
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is typing.Annotated:
            if any(m is pydantic.Json or isinstance(m, pydantic.Json) for m in tp.__metadata__):
                # Json[T]: the worker reads a string and parses it as T
                return ir.Json(self.walk(args[0], where))
            self.notes.extend(validator_notes(tp.__metadata__))
            return self._annotated(args[0], tp.__metadata__, where)
        if origin in (typing.Required, typing.NotRequired, typing.ClassVar, typing.Final):
            return self.walk(args[0], where)
        if origin is typing.Literal:
            return self._literal(args, where)
        if origin in UNION_ORIGINS:
            return self._union([self.walk(a, where) for a in args])
        if isinstance(tp, typing.TypeVar):
            return ir.Var(typevar_name(tp))
        if isinstance(tp, typing.NewType):
            return ir.Ref(self._definition(tp, where, definitions.newtype_def))
        if ALIAS_TYPES and isinstance(tp, ALIAS_TYPES):
            return self._alias(tp, (), where)
        if ALIAS_TYPES and isinstance(origin, ALIAS_TYPES):
            return self._alias(origin, args, where)  # a generic alias, parametrised: Pair[int]
        if tp is pydantic.Json or origin is pydantic.Json:
            return ir.Json(ir.Prim("any"))
        relative = RELATIVE_TIME.get(tp) if isinstance(tp, type) else None
        if relative is not None:
            # FutureDate and the like: the base type; the clock is the worker's to read
            self.notes.append(relative[1])
            return ir.Prim(relative[0])
        if isinstance(tp, dataclasses.InitVar):
            return self.walk(tp.type, where)
        container = self._container(tp, origin, args, where)
        if container is not None:
            return container
        if origin is not None and inspect.isclass(origin) and args:
            # a parametrised generic class: dataclass or TypedDict (pydantic makes subclasses)
            base = self.walk(origin, where)
            if isinstance(base, ir.Ref):
                return ir.Ref(base.name, [self.walk(a, where) for a in args])
            return base
        if inspect.isclass(tp):
            return self._class(tp, where)
        key = describe(tp)
        return self.problem(
            where,
            f"unsupported type {key}",
            FIX_UNSUPPORTED.format(key=key),
        )

    def _override(self, tp: Any) -> ir.TypeNode | None:
        if not self.overrides or not (inspect.isclass(tp) or isinstance(tp, typing.NewType)):
            return None
        target = self.overrides.get(describe(tp))
        if target is None:
            return None
        return ir.Prim(typing.cast(ir.PrimName, target))

    def _annotated(self, base: Any, metadata: tuple[Any, ...], where: str) -> ir.TypeNode:
        node = self.walk(base, where)
        tag = discriminator(metadata)
        if tag is not None and isinstance(node, ir.Union):
            members = [m for m in node.members if m != ir.Prim("none")]
            wire = self._wire_tag(ir.Union(members), tag) if len(members) > 1 else None
            if wire is not None:
                tagged = ir.Union(members, wire)
                node = tagged if len(members) == len(node.members) else ir.Union([tagged, ir.Prim("none")])
        found: dict[str, Any] = {}
        collect_constraints(metadata, found)
        allowed = constraint_names(node)
        kept = {name: value for name, value in found.items() if name in allowed}
        for name in ("gt", "ge", "lt", "le", "multiple_of"):
            if name in kept:
                kept[name] = bound(node.type if isinstance(node, ir.Annotated) else node, kept[name])
        kept = {name: value for name, value in kept.items() if value is not None}
        if not kept:
            return node
        if isinstance(node, ir.Annotated):
            kept = {**msgspec.structs.asdict(node.meta), **kept}
            kept = {k: v for k, v in kept.items() if v is not None}
            node = node.type
        return ir.Annotated(node, ir.Constraints(**kept))

    def _literal(self, values: tuple[Any, ...], where: str) -> ir.TypeNode:
        out: list[ir.LiteralValue] = []
        for value in values:
            if isinstance(value, enum.Enum):
                ref = self.walk(type(value), where)
                if isinstance(ref, ir.Ref):
                    out.append(ir.EnumMember(ref.name, value.name))
            elif value is None or isinstance(value, str | int | bool):
                out.append(value)
            else:
                self.problem(
                    where, f"unsupported Literal value {value!r}", "use str, int, bool, None or enum members"
                )
        return ir.Lit(out)

    def _wire_tag(self, union: ir.Union, tag: str) -> str | None:
        """The wire name of a discriminated union's tag field (pydantic names it by the field
        name or its alias), if every member is a mirrored class with that field."""
        wires: set[str] = set()
        for member in union.members:
            definition = self._definitions.get(member.name) if isinstance(member, ir.Ref) else None
            if not isinstance(definition, ir.StructDef | ir.TypedDictDef):
                return None
            found = [f.wire for f in definition.fields if tag in (f.name, f.wire)]
            if len(found) != 1:
                return None
            wires.add(found[0])
        return wires.pop() if len(wires) == 1 else None

    @staticmethod
    def _union(members: list[ir.TypeNode]) -> ir.TypeNode:
        flat: list[ir.TypeNode] = []
        for member in members:
            # a discriminated union stays one member: its tag tells its own members apart
            tagged = isinstance(member, ir.Union) and member.discriminator is not None
            for item in member.members if isinstance(member, ir.Union) and not tagged else [member]:
                if item not in flat:
                    flat.append(item)
        if any(m == ir.Prim("any") for m in flat):
            return ir.Prim("any")
        # None last, as people write it; the rest in source order
        flat.sort(key=lambda m: m == ir.Prim("none"))
        return flat[0] if len(flat) == 1 else ir.Union(flat)

    def _container(self, tp: Any, origin: Any, args: tuple[Any, ...], where: str) -> ir.TypeNode | None:
        kind = lookup(SEQUENCES, origin if origin is not None else tp)
        if kind is not None:
            return ir.Seq(kind, self.walk(args[0], where) if args else ir.Prim("any"))
        mapping = lookup(MAPPINGS, origin if origin is not None else tp)
        if mapping is not None:
            key, value = (self.walk(a, where) for a in args) if args else (ir.Prim("str"), ir.Prim("any"))
            return ir.Dict(key, value, mapping)
        if tp is tuple or origin is tuple or tp is typing.Tuple:  # noqa: UP006
            if not args:
                return ir.Seq("tuple", ir.Prim("any"))
            if len(args) == 2 and args[1] is Ellipsis:
                return ir.Seq("tuple", self.walk(args[0], where))
            if args == ((),):
                return ir.Tuple([])
            return ir.Tuple([self.walk(a, where) for a in args])
        return None

    def _alias(self, alias: Any, args: tuple[Any, ...], where: str) -> ir.TypeNode:
        """A type alias is inlined; a generic one with its type parameters replaced by ``args``."""
        if alias in self._aliases:
            return self.problem(
                where,
                f"recursive type alias {alias.__name__}",
                "wrap the recursive part in a pydantic model or dataclass",
            )
        self._aliases.append(alias)
        try:
            return self.walk(alias_value(alias, args), where)
        finally:
            self._aliases.pop()

    def _class(self, cls: type, where: str) -> ir.TypeNode:
        if issubclass(cls, pydantic.RootModel):
            return self.walk(cls.model_fields["root"].annotation, f"{describe(cls)}.root")
        if issubclass(cls, pydantic.BaseModel):
            meta = cls.__pydantic_generic_metadata__
            if meta["origin"] is not None and meta["args"]:
                base = self.walk(meta["origin"], where)
                if isinstance(base, ir.Ref):
                    return ir.Ref(base.name, [self.walk(a, where) for a in meta["args"]])
                return base
            return ir.Ref(self._definition(cls, where, definitions.pydantic_struct))
        if issubclass(cls, enum.Enum):
            return ir.Ref(self._definition(cls, where, definitions.enum_def))
        if dataclasses.is_dataclass(cls):
            return ir.Ref(self._definition(cls, where, definitions.dataclass_struct))
        if typing_extensions.is_typeddict(cls):
            return ir.Ref(self._definition(cls, where, definitions.typeddict_def))
        if issubclass(cls, tuple) and hasattr(cls, "_fields"):
            return ir.Ref(self._definition(cls, where, definitions.namedtuple_def))
        for base, prim in STR_LIKE.items():
            if issubclass(cls, base):
                return ir.Prim(prim)
        if issubclass(cls, AS_STR):
            return ir.Prim("str")
        if issubclass(cls, msgspec.Struct):
            return self.problem(
                where,
                f"msgspec Struct {describe(cls)} is not supported: the worker validates "
                "arguments with pydantic",
                "use a pydantic model or a dataclass for task arguments",
            )
        key = describe(cls)
        return self.problem(where, f"unsupported type {key}", FIX_UNSUPPORTED.format(key=key))

    # -- definitions -----------------------------------------------------------------------

    def _definition(self, obj: Any, where: str, build: Builder) -> str:
        """The key of ``obj``'s definition, built on first sight (recursion-safe)."""
        key = self._keys.get(obj)
        if key is not None:
            return key
        key = describe(obj)
        if key in self._definitions:  # a different object with the same qualified name
            n = 2
            while f"{key}#{n}" in self._definitions:
                n += 1
            key = f"{key}#{n}"
        self._keys[obj] = key
        self._definitions[key] = None
        self._short[key] = obj.__name__.lstrip("_") or "Type"
        self._module[key] = getattr(obj, "__module__", "") or ""
        self._definitions[key] = build(self, obj, key, where)
        return key

    # -- naming ----------------------------------------------------------------------------

    def finish(self) -> list[ir.Definition]:
        """Give each definition its mirror name and return them sorted by that name."""
        names = mirror_names({key: (self._short[key], self._module[key]) for key in self._definitions})
        self.renames = names
        out: list[ir.Definition] = []
        for key, definition in self._definitions.items():
            if definition is None:
                continue
            out.append(rename_definition(definition, names[key], names))
        return sorted(out, key=lambda d: d.name)


def partial_keywords(fn: Any) -> frozenset[str]:
    """The names a ``functools.partial`` (nested ones too) binds by keyword.

    Bound by position, an argument leaves the signature; bound by keyword it stays in it, as
    optional, since a call could override it. Either way the worker fixed its value when it
    registered the task, so producers' clients leave it out.
    """
    names: set[str] = set()
    while isinstance(fn, functools.partial):
        names.update(fn.keywords)
        fn = fn.func
    return frozenset(names)
