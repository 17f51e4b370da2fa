"""Python types -> manifest type nodes and mirror definitions (the walk discovery does).

Reads the live objects: pydantic ``model_fields`` (aliases after alias generators,
inheritance, generics), dataclass fields (``InitVar`` kept, ``init=False`` and ``ClassVar``
skipped), TypedDict and NamedTuple fields, enum members, NewTypes and aliases. What cannot be
mirrored faithfully becomes a CodegenProblem with a fix; the walk goes on to find the rest.
"""

from __future__ import annotations

import collections.abc as abc
import dataclasses
import datetime as dt
import decimal
import enum
import inspect
import ipaddress
import keyword
import pathlib
import re
import types
import typing
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import msgspec
import pydantic
import typing_extensions

from akadze.task import Task
from akadze_codegen import signature as ir
from akadze_codegen.problems import CodegenProblem

_PRIMS: dict[Any, ir.PrimName] = {
    int: "int",
    float: "float",
    str: "str",
    bool: "bool",
    bytes: "bytes",
    dt.datetime: "datetime",
    dt.date: "date",
    dt.time: "time",
    dt.timedelta: "timedelta",
    uuid.UUID: "uuid",
    decimal.Decimal: "decimal",
}

#: types that travel as a JSON string which the worker's pydantic parses back
_AS_STR: tuple[Any, ...] = (
    pathlib.PurePath,
    ipaddress.IPv4Address,
    ipaddress.IPv6Address,
    ipaddress.IPv4Network,
    ipaddress.IPv6Network,
    ipaddress.IPv4Interface,
    ipaddress.IPv6Interface,
    re.Pattern,
    pydantic.SecretStr,
    pydantic.AnyUrl,
    pydantic.NameEmail,
)
_TZ: dict[Any, bool] = {pydantic.AwareDatetime: True, pydantic.NaiveDatetime: False}
_SEQUENCES: dict[Any, typing.Literal["list", "set", "frozenset", "sequence"]] = {
    list: "list",
    set: "set",
    frozenset: "frozenset",
    typing.List: "list",  # noqa: UP006 (the old aliases appear in worker code)
    typing.Set: "set",  # noqa: UP006
    typing.FrozenSet: "frozenset",  # noqa: UP006
    typing.Sequence: "sequence",
    typing.MutableSequence: "list",
    abc.Sequence: "sequence",
    abc.MutableSequence: "list",
    abc.Set: "frozenset",
    abc.MutableSet: "set",
}
_MAPPINGS: dict[Any, bool] = {
    dict: False,
    typing.Dict: False,  # noqa: UP006
    typing.Mapping: True,
    typing.MutableMapping: False,
    abc.Mapping: True,
    abc.MutableMapping: False,
}
_ALIAS_TYPES: tuple[type, ...] = tuple(
    {getattr(typing, "TypeAliasType", None), typing_extensions.TypeAliasType} - {None}  # type: ignore[arg-type]
)
_UNION_ORIGINS = (typing.Union, types.UnionType)
_DEFAULT_TEXT_LIMIT = 60

#: override targets allowed in [tool.akadze.codegen.type_overrides]
OVERRIDE_TARGETS: frozenset[str] = frozenset(typing.get_args(ir.PrimName))

_FIX_UNSUPPORTED = (
    "use a supported type (builtins, datetime, UUID, Decimal, enums, pydantic models, "
    "dataclasses, TypedDict, NamedTuple), or map it to a wire type in pyproject.toml: "
    '[tool.akadze.codegen.type_overrides] "{key}" = "str"'
)


def _typeddict_required(cls: Any, name: str, hint: Any) -> bool:
    """As pydantic decides: an explicit Required/NotRequired wins over ``__required_keys__``
    (which Python 3.11 gets wrong for string annotations)."""
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        origin = typing.get_origin(typing.get_args(hint)[0])
    if origin in (typing.NotRequired, typing_extensions.NotRequired):
        return False
    if origin in (typing.Required, typing_extensions.Required):
        return True
    return name in getattr(cls, "__required_keys__", frozenset())


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

    def problem(self, where: str, message: str, fix: str = "") -> ir.Prim:
        self.problems.append(CodegenProblem(where, message, fix))
        return ir.Prim("any")

    # -- tasks -----------------------------------------------------------------------------

    def params(self, task: Task[Any, Any]) -> list[ir.Param]:
        """The task's parameters as its codec validates them (its argument TypedDict)."""
        signature = task.codec.signature
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
                required = _typeddict_required(typed_dict, param.name, hint)
            else:
                required = param.default is inspect.Parameter.empty
            params.append(
                ir.Param(
                    name=param.name,
                    type=self.walk(hint, where),
                    required=required,
                    default=None if required else _default_text(param.default, None),
                )
            )
        return params

    # -- types -----------------------------------------------------------------------------

    def walk(self, tp: Any, where: str) -> ir.TypeNode:
        if tp is Any or tp is object:
            return ir.Prim("any")
        if tp is None or tp is type(None):
            return ir.Prim("none")
        override = self._override(tp)
        if override is not None:
            return override
        prim = _lookup(_PRIMS, tp)
        if prim is not None:
            return ir.Prim(prim)
        tz = _lookup(_TZ, tp)
        if tz is not None:
            return ir.Annotated(ir.Prim("datetime"), ir.Constraints(tz=tz))
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is typing.Annotated:
            return self._annotated(args[0], tp.__metadata__, where)
        if origin in (typing.Required, typing.NotRequired, typing.ClassVar, typing.Final):
            return self.walk(args[0], where)
        if origin is typing.Literal:
            return self._literal(args, where)
        if origin in _UNION_ORIGINS:
            return self._union([self.walk(a, where) for a in args])
        if isinstance(tp, typing.TypeVar):
            return ir.Var(_typevar_name(tp))
        if isinstance(tp, typing.NewType):
            return ir.Ref(self._definition(tp, where, self._newtype))
        if _ALIAS_TYPES and isinstance(tp, _ALIAS_TYPES):
            return self._alias(tp, where)
        if tp is pydantic.Json or origin is pydantic.Json:
            return ir.Prim("any")
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
        key = _describe(tp)
        return self.problem(
            where,
            f"unsupported type {key}",
            _FIX_UNSUPPORTED.format(key=key),
        )

    def _override(self, tp: Any) -> ir.TypeNode | None:
        if not self.overrides or not (inspect.isclass(tp) or isinstance(tp, typing.NewType)):
            return None
        target = self.overrides.get(_describe(tp))
        if target is None:
            return None
        return ir.Prim(typing.cast(ir.PrimName, target))

    def _annotated(self, base: Any, metadata: tuple[Any, ...], where: str) -> ir.TypeNode:
        node = self.walk(base, where)
        found: dict[str, Any] = {}
        _collect_constraints(metadata, found)
        allowed = _constraint_names(node)
        kept = {name: value for name, value in found.items() if name in allowed}
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

    @staticmethod
    def _union(members: list[ir.TypeNode]) -> ir.TypeNode:
        flat: list[ir.TypeNode] = []
        for member in members:
            for item in member.members if isinstance(member, ir.Union) else [member]:
                if item not in flat:
                    flat.append(item)
        if any(m == ir.Prim("any") for m in flat):
            return ir.Prim("any")
        # None last, as people write it; the rest in source order
        flat.sort(key=lambda m: m == ir.Prim("none"))
        return flat[0] if len(flat) == 1 else ir.Union(flat)

    def _container(self, tp: Any, origin: Any, args: tuple[Any, ...], where: str) -> ir.TypeNode | None:
        kind = _lookup(_SEQUENCES, origin if origin is not None else tp)
        if kind is not None:
            return ir.Seq(kind, self.walk(args[0], where) if args else ir.Prim("any"))
        mapping = _lookup(_MAPPINGS, origin if origin is not None else tp)
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

    def _alias(self, alias: Any, where: str) -> ir.TypeNode:
        if alias in self._aliases:
            return self.problem(
                where,
                f"recursive type alias {alias.__name__}",
                "wrap the recursive part in a pydantic model or dataclass",
            )
        self._aliases.append(alias)
        try:
            return self.walk(alias.__value__, where)
        finally:
            self._aliases.pop()

    def _class(self, cls: type, where: str) -> ir.TypeNode:
        if issubclass(cls, pydantic.RootModel):
            return self.walk(cls.model_fields["root"].annotation, f"{_describe(cls)}.root")
        if issubclass(cls, pydantic.BaseModel):
            meta = cls.__pydantic_generic_metadata__
            if meta["origin"] is not None and meta["args"]:
                base = self.walk(meta["origin"], where)
                if isinstance(base, ir.Ref):
                    return ir.Ref(base.name, [self.walk(a, where) for a in meta["args"]])
                return base
            return ir.Ref(self._definition(cls, where, self._pydantic))
        if issubclass(cls, enum.Enum):
            return ir.Ref(self._definition(cls, where, self._enum))
        if dataclasses.is_dataclass(cls):
            return ir.Ref(self._definition(cls, where, self._dataclass))
        if typing_extensions.is_typeddict(cls):
            return ir.Ref(self._definition(cls, where, self._typeddict))
        if issubclass(cls, tuple) and hasattr(cls, "_fields"):
            return ir.Ref(self._definition(cls, where, self._namedtuple))
        if issubclass(cls, _AS_STR):
            return ir.Prim("str")
        if issubclass(cls, msgspec.Struct):
            return self.problem(
                where,
                f"msgspec Struct {_describe(cls)} is not supported: the worker validates "
                "arguments with pydantic",
                "use a pydantic model or a dataclass for task arguments",
            )
        key = _describe(cls)
        return self.problem(where, f"unsupported type {key}", _FIX_UNSUPPORTED.format(key=key))

    # -- definitions -----------------------------------------------------------------------

    def _definition(
        self, obj: Any, where: str, build: Callable[[Any, str, str], ir.Definition | None]
    ) -> str:
        """The key of ``obj``'s definition, built on first sight (recursion-safe)."""
        key = self._keys.get(obj)
        if key is not None:
            return key
        key = _describe(obj)
        if key in self._definitions:  # a different object with the same qualified name
            n = 2
            while f"{key}#{n}" in self._definitions:
                n += 1
            key = f"{key}#{n}"
        self._keys[obj] = key
        self._definitions[key] = None
        self._short[key] = obj.__name__.lstrip("_") or "Type"
        self._module[key] = getattr(obj, "__module__", "") or ""
        self._definitions[key] = build(obj, key, where)
        return key

    def _pydantic(self, cls: type[pydantic.BaseModel], key: str, where: str) -> ir.Definition:
        config = cls.model_config
        fields: list[ir.Field] = []
        for name, info in cls.model_fields.items():
            here = f"{key}.{name}"
            wire = self._wire_name(info, name, here)
            required = info.is_required()
            if info.exclude is True:
                if required:
                    self.problem(
                        here,
                        "a required field with exclude=True is never stored in a job",
                        "give it a default, or drop exclude=True",
                    )
                continue
            annotation: Any = info.annotation
            if info.metadata:
                annotation = typing.Annotated[(annotation, *info.metadata)]
            node = self.walk(annotation, here)
            if _mentions(node, ir.Prim("bytes")) and config.get("val_json_bytes") != "base64":
                self.problem(
                    here,
                    "bytes travel as base64, but this model reads JSON bytes as UTF-8 text, so "
                    "they would arrive corrupted",
                    'add model_config = ConfigDict(val_json_bytes="base64", '
                    'ser_json_bytes="base64") to the model',
                )
            default = None if required else _default_text(info.default, info.default_factory)
            fields.append(
                ir.Field(
                    name=name,
                    wire=wire,
                    type=node,
                    required=required,
                    literal_default=not required and _is_tag(node, info.default),
                    default=default,
                )
            )
        params = cls.__pydantic_generic_metadata__["parameters"]
        return ir.StructDef(
            name="",
            origin=key,
            source="pydantic",
            fields=fields,
            type_params=[_typevar_name(p) for p in params],
        )

    def _wire_name(self, info: Any, name: str, where: str) -> str:
        alias = info.validation_alias
        if isinstance(alias, pydantic.AliasChoices):
            alias = alias.choices[0]
        if isinstance(alias, pydantic.AliasPath):
            self.problem(
                where,
                "validation_alias=AliasPath(...) reads a nested path, which a mirror cannot write",
                "use a plain alias, or put the first choice of AliasChoices as a string",
            )
            return name
        if isinstance(alias, str):
            return alias
        return info.alias if isinstance(info.alias, str) else name

    def _dataclass(self, cls: type, key: str, where: str) -> ir.Definition:
        try:
            hints = typing.get_type_hints(cls, include_extras=True)
        except Exception as exc:
            self.problem(key, f"cannot resolve the field types ({type(exc).__name__}: {exc})")
            hints = {}
        pydantic_fields: dict[str, Any] = getattr(cls, "__pydantic_fields__", None) or {}
        fields: list[ir.Field] = []
        all_fields: dict[str, Any] = getattr(cls, "__dataclass_fields__", {})
        for name, field in all_fields.items():
            kind = getattr(field, "_field_type", None)
            if kind is getattr(dataclasses, "_FIELD_CLASSVAR", object()) or not field.init:
                continue
            here = f"{key}.{name}"
            info = pydantic_fields.get(name)
            annotation: Any = hints.get(name, Any)
            if info is not None and info.metadata:
                annotation = typing.Annotated[(info.annotation, *info.metadata)]
            node = self.walk(annotation, here)
            has_default = field.default is not dataclasses.MISSING or (
                field.default_factory is not dataclasses.MISSING
            )
            default_value = field.default if field.default is not dataclasses.MISSING else None
            factory = None if field.default_factory is dataclasses.MISSING else field.default_factory
            fields.append(
                ir.Field(
                    name=name,
                    wire=self._wire_name(info, name, here) if info is not None else name,
                    type=node,
                    required=not has_default,
                    literal_default=has_default and _is_tag(node, default_value),
                    default=_default_text(default_value, factory) if has_default else None,
                )
            )
        params = getattr(cls, "__parameters__", ())
        return ir.StructDef(
            name="",
            origin=key,
            source="dataclass",
            fields=fields,
            type_params=[_typevar_name(p) for p in params],
        )

    def _typeddict(self, cls: Any, key: str, where: str) -> ir.Definition:
        hints = typing.get_type_hints(cls, include_extras=True)
        fields = [
            ir.Field(
                name=name,
                wire=name,
                type=self.walk(tp, f"{key}.{name}"),
                required=_typeddict_required(cls, name, tp),
            )
            for name, tp in hints.items()
        ]
        return ir.TypedDictDef(name="", origin=key, fields=fields)

    def _namedtuple(self, cls: Any, key: str, where: str) -> ir.Definition:
        hints = typing.get_type_hints(cls, include_extras=True)
        fields = [
            ir.Field(
                name=name,
                wire=name,
                type=self.walk(hints.get(name, Any), f"{key}.{name}"),
                required=True,
            )
            for name in cls._fields
        ]
        return ir.NamedTupleDef(name="", origin=key, fields=fields)

    def _enum(self, cls: type[enum.Enum], key: str, where: str) -> ir.Definition:
        base: typing.Literal["enum", "str", "int", "strenum", "intenum", "flag", "intflag"]
        if issubclass(cls, enum.StrEnum):
            base = "strenum"
        elif issubclass(cls, enum.IntFlag):
            base = "intflag"
        elif issubclass(cls, enum.IntEnum):
            base = "intenum"
        elif issubclass(cls, enum.Flag):
            base = "flag"
        elif issubclass(cls, str):
            base = "str"
        elif issubclass(cls, int):
            base = "int"
        else:
            base = "enum"
        members: list[tuple[str, str | int]] = []
        for name, member in cls.__members__.items():
            value = member.value
            if isinstance(value, bool) or not isinstance(value, str | int):
                self.problem(
                    f"{key}.{name}",
                    f"enum value {value!r} is not a str or int",
                    "use str or int values for enums in task arguments",
                )
                continue
            if not name.isidentifier() or keyword.iskeyword(name):
                self.problem(f"{key}.{name}", f"enum member name {name!r} is not an identifier")
                continue
            members.append((name, value))
        return ir.EnumDef(name="", origin=key, base=base, members=members)

    def _newtype(self, tp: Any, key: str, where: str) -> ir.Definition:
        return ir.NewTypeDef(name="", origin=key, type=self.walk(tp.__supertype__, key))

    # -- naming ----------------------------------------------------------------------------

    def finish(self) -> list[ir.Definition]:
        """Give each definition its mirror name and return them sorted by that name."""
        names = _mirror_names({key: (self._short[key], self._module[key]) for key in self._definitions})
        self.renames = names
        out: list[ir.Definition] = []
        for key, definition in self._definitions.items():
            if definition is None:
                continue
            out.append(_rename_definition(definition, names[key], names))
        return sorted(out, key=lambda d: d.name)


def _mirror_names(entries: dict[str, tuple[str, str]]) -> dict[str, str]:
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
    if isinstance(node, ir.Seq):
        return ir.Seq(node.kind, rename(node.item, names))
    if isinstance(node, ir.Tuple):
        return ir.Tuple([rename(i, names) for i in node.items])
    if isinstance(node, ir.Dict):
        return ir.Dict(rename(node.key, names), rename(node.value, names), node.mapping)
    if isinstance(node, ir.Union):
        return ir.Union([rename(m, names) for m in node.members])
    if isinstance(node, ir.Annotated):
        return ir.Annotated(rename(node.type, names), node.meta)
    if isinstance(node, ir.Lit):
        return ir.Lit(
            [
                ir.EnumMember(names.get(v.enum, v.enum), v.member) if isinstance(v, ir.EnumMember) else v
                for v in node.values
            ]
        )
    return node


def _rename_definition(definition: ir.Definition, name: str, names: Mapping[str, str]) -> ir.Definition:
    if isinstance(definition, ir.StructDef | ir.TypedDictDef | ir.NamedTupleDef):
        fields = [msgspec.structs.replace(f, type=rename(f.type, names)) for f in definition.fields]
        return msgspec.structs.replace(definition, name=name, fields=fields)
    if isinstance(definition, ir.NewTypeDef):
        return msgspec.structs.replace(definition, name=name, type=rename(definition.type, names))
    return msgspec.structs.replace(definition, name=name)


def _mentions(node: ir.TypeNode, target: ir.TypeNode) -> bool:
    """Whether ``target`` occurs in ``node`` outside other definitions."""
    if node == target:
        return True
    if isinstance(node, ir.Seq):
        return _mentions(node.item, target)
    if isinstance(node, ir.Tuple):
        return any(_mentions(i, target) for i in node.items)
    if isinstance(node, ir.Dict):
        return _mentions(node.key, target) or _mentions(node.value, target)
    if isinstance(node, ir.Union):
        return any(_mentions(m, target) for m in node.members)
    if isinstance(node, ir.Annotated):
        return _mentions(node.type, target)
    if isinstance(node, ir.Ref):
        return any(_mentions(a, target) for a in node.args)
    return False


def _is_tag(node: ir.TypeNode, default: Any) -> bool:
    """A one-value Literal whose default is that value: a tag that must stay on the wire."""
    if not isinstance(node, ir.Lit) or len(node.values) != 1:
        return False
    (value,) = node.values
    if isinstance(value, ir.EnumMember):
        return isinstance(default, enum.Enum) and default.name == value.member
    return type(default) is type(value) and default == value


_CONSTRAINT_ATTRS = ("gt", "ge", "lt", "le", "multiple_of", "min_length", "max_length", "pattern")


def _collect_constraints(metadata: tuple[Any, ...] | list[Any], found: dict[str, Any]) -> None:
    for item in metadata:
        if isinstance(item, pydantic.fields.FieldInfo):
            _collect_constraints(item.metadata, found)
            continue
        for attr in _CONSTRAINT_ATTRS:
            value = getattr(item, attr, None)
            if attr == "pattern" and isinstance(value, re.Pattern):
                value = value.pattern
            if attr == "pattern" and isinstance(value, str):
                found[attr] = value
            elif attr in ("min_length", "max_length") and type(value) is int:
                found[attr] = value
            elif attr not in ("pattern", "min_length", "max_length") and type(value) in (int, float):
                found[attr] = value
        tz = getattr(item, "tz", None)
        if type(item).__name__ == "Timezone":
            found["tz"] = tz is not None


def _constraint_names(node: ir.TypeNode) -> frozenset[str]:
    if isinstance(node, ir.Annotated):
        node = node.type
    if node in (ir.Prim("int"), ir.Prim("float")):
        return frozenset({"gt", "ge", "lt", "le", "multiple_of"})
    if node == ir.Prim("str"):
        return frozenset({"min_length", "max_length", "pattern"})
    if node in (ir.Prim("datetime"), ir.Prim("time")):
        return frozenset({"tz"})
    if isinstance(node, ir.Seq | ir.Dict) or node == ir.Prim("bytes"):
        return frozenset({"min_length", "max_length"})
    return frozenset()


def _lookup(table: Mapping[Any, Any], key: Any) -> Any:
    try:
        return table.get(key)
    except TypeError:  # unhashable annotation metadata
        return None


def _typevar_name(tp: Any) -> str:
    name: str = tp.__name__
    return name if name.startswith("_") else f"_{name}"


def _describe(tp: Any) -> str:
    module = getattr(tp, "__module__", None) or "?"
    name = getattr(tp, "__qualname__", None) or getattr(tp, "__name__", None) or repr(tp)
    return f"{module}:{name}"


def _default_text(value: Any, factory: Any) -> str | None:
    """The worker's default for the docs: simple values only, so the text is deterministic."""
    if factory is not None and factory is not dataclasses.MISSING:
        simple = {list: "[]", dict: "{}", set: "set()", tuple: "()", frozenset: "frozenset()"}
        text = simple.get(factory)
        return text or f"{getattr(factory, '__name__', 'factory')}()"
    if value is inspect.Parameter.empty or type(value).__name__ == "PydanticUndefinedType":
        return None
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if value is None or isinstance(value, bool | int | float | str | decimal.Decimal):
        text = repr(value)
        if len(text) > _DEFAULT_TEXT_LIMIT:
            text = text[: _DEFAULT_TEXT_LIMIT - 3] + "..."
        return text
    if isinstance(value, tuple | list | frozenset) and not value:
        return repr(value)
    return None
