"""What the walk knows about Python types: the tables of leaf, container and string-like types,
and pure helpers over annotations and IR nodes (no state, no problems collected).

Used by mirror.Walker (the walk) and definitions (the classes it mirrors).
"""

from __future__ import annotations

import collections.abc as abc
import dataclasses
import datetime as dt
import decimal
import enum
import inspect
import ipaddress
import pathlib
import re
import types
import typing
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import pydantic
import pydantic_core
import typing_extensions

from akadze_codegen import signature as ir

PRIMS: dict[Any, ir.PrimName] = {
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

#: types that travel as a JSON string (``str()`` of the value) which the worker's pydantic
#: parses back: the mirror takes a ``str`` or the type itself (clients encode it with ``str()``)
STR_LIKE: dict[Any, ir.PrimName] = {
    pathlib.PurePath: "path",
    ipaddress.IPv4Address: "ipv4address",
    ipaddress.IPv6Address: "ipv6address",
    pydantic.IPvAnyAddress: "ipaddress",
    ipaddress.IPv4Network: "ipv4network",
    ipaddress.IPv6Network: "ipv6network",
    pydantic.IPvAnyNetwork: "ipnetwork",
    ipaddress.IPv4Interface: "ipv4interface",
    ipaddress.IPv6Interface: "ipv6interface",
    pydantic.IPvAnyInterface: "ipinterface",
}
#: types that travel as a JSON string which the worker's pydantic parses back, mirrored as
#: ``str``: their Python types are pydantic's (a producer need not have pydantic), or their
#: ``str()`` is not what travels (``SecretStr``)
AS_STR: tuple[Any, ...] = tuple(
    cls
    for cls in (
        re.Pattern,
        pydantic.SecretStr,
        pydantic.AnyUrl,
        getattr(pydantic.networks, "_BaseMultiHostUrl", None),  # PostgresDsn, MongoDsn, NatsDsn
        pydantic.EmailStr,
        pydantic.NameEmail,
        pydantic_core.Url,
        pydantic_core.MultiHostUrl,
    )
    if cls is not None
)
TZ: dict[Any, bool] = {pydantic.AwareDatetime: True, pydantic.NaiveDatetime: False}
#: pydantic's dates and datetimes relative to the worker's clock: their base type, and the note
#: the docs carry (no client can check them: the job may run later than it is enqueued)
RELATIVE_TIME: dict[Any, tuple[ir.PrimName, str]] = {
    pydantic.FutureDate: ("date", "a date in the future when the job runs"),
    pydantic.PastDate: ("date", "a date in the past when the job runs"),
    pydantic.FutureDatetime: ("datetime", "a datetime in the future when the job runs"),
    pydantic.PastDatetime: ("datetime", "a datetime in the past when the job runs"),
}
#: pydantic's functional validators, which run worker code no client has
_VALIDATORS = (
    pydantic.AfterValidator,
    pydantic.BeforeValidator,
    pydantic.PlainValidator,
    pydantic.WrapValidator,
)


def validator_notes(metadata: Iterable[Any]) -> list[str]:
    """``validator <name>`` for each functional validator in annotation metadata."""
    return [
        f"validator {getattr(item.func, '__name__', 'function')}"
        for item in metadata
        if isinstance(item, _VALIDATORS)
    ]


SEQUENCES: dict[Any, typing.Literal["list", "set", "frozenset", "sequence"]] = {
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
MAPPINGS: dict[Any, bool] = {
    dict: False,
    typing.Dict: False,  # noqa: UP006
    typing.Mapping: True,
    typing.MutableMapping: False,
    abc.Mapping: True,
    abc.MutableMapping: False,
}
ALIAS_TYPES: tuple[type, ...] = tuple(
    {getattr(typing, "TypeAliasType", None), typing_extensions.TypeAliasType} - {None}  # type: ignore[arg-type]
)
UNION_ORIGINS = (typing.Union, types.UnionType)
_DEFAULT_TEXT_LIMIT = 60

#: override targets allowed in [tool.akadze.codegen.type_overrides]
OVERRIDE_TARGETS: frozenset[str] = frozenset(typing.get_args(ir.PrimName))

FIX_UNSUPPORTED = (
    "use a supported type (builtins, datetime, UUID, Decimal, enums, pydantic models, "
    "dataclasses, TypedDict, NamedTuple), or map it to a wire type in pyproject.toml: "
    '[tool.akadze.codegen.type_overrides] "{key}" = "str"'
)


def typeddict_required(cls: Any, name: str, hint: Any) -> bool:
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


def alias_value(alias: Any, args: tuple[Any, ...]) -> Any:
    """What a type alias stands for; for a generic one (``type Pair[T] = tuple[T, T]``) used
    as ``Pair[int]``, its value with each type parameter replaced by its argument."""
    value = alias.__value__
    free: tuple[Any, ...] = getattr(value, "__parameters__", ())
    if not args or not free:
        return value
    bound = dict(zip(getattr(alias, "__type_params__", ()), args, strict=False))
    return value[tuple(bound.get(param, param) for param in free)]


def mentions(node: ir.TypeNode, target: ir.TypeNode) -> bool:
    """Whether ``target`` occurs in ``node`` outside other definitions."""
    if node == target:
        return True
    if isinstance(node, ir.Seq):
        return mentions(node.item, target)
    if isinstance(node, ir.Tuple):
        return any(mentions(i, target) for i in node.items)
    if isinstance(node, ir.Dict):
        return mentions(node.key, target) or mentions(node.value, target)
    if isinstance(node, ir.Union):
        return any(mentions(m, target) for m in node.members)
    if isinstance(node, ir.Annotated):
        return mentions(node.type, target)
    if isinstance(node, ir.Ref):
        return any(mentions(a, target) for a in node.args)
    return False


def is_tag(node: ir.TypeNode, default: Any) -> bool:
    """A one-value Literal whose default is that value: a tag that must stay on the wire."""
    if not isinstance(node, ir.Lit) or len(node.values) != 1:
        return False
    (value,) = node.values
    if isinstance(value, ir.EnumMember):
        return isinstance(default, enum.Enum) and default.name == value.member
    return type(default) is type(value) and default == value


_BOUNDS = ("gt", "ge", "lt", "le", "multiple_of")
_CONSTRAINT_ATTRS = (*_BOUNDS, "min_length", "max_length", "pattern", "max_digits", "decimal_places")


def collect_constraints(metadata: tuple[Any, ...] | list[Any], found: dict[str, Any]) -> None:
    """The constraints in annotation metadata, their values as given (see :func:`bound`)."""
    for item in metadata:
        if isinstance(item, pydantic.fields.FieldInfo):
            collect_constraints(item.metadata, found)
            continue
        for attr in _CONSTRAINT_ATTRS:
            value = getattr(item, attr, None)
            if attr == "pattern" and isinstance(value, re.Pattern):
                value = value.pattern
            if attr == "pattern" and isinstance(value, str):
                found[attr] = value
            elif attr not in ("pattern", *_BOUNDS) and type(value) is int:
                found[attr] = value
            elif attr in _BOUNDS and value is not None and not isinstance(value, bool):
                found[attr] = value
        tz = getattr(item, "tz", None)
        if type(item).__name__ == "Timezone":
            found["tz"] = tz is not None


def bound(node: ir.TypeNode, value: Any) -> ir.Bound | None:
    """A bound as the manifest carries it for a value of type ``node``, or None if it cannot
    be carried faithfully (the worker checks it all the same)."""
    if node in (ir.Prim("int"), ir.Prim("float")):
        return value if type(value) in (int, float) else None
    if node == ir.Prim("decimal") and isinstance(value, int | float | decimal.Decimal):
        text = str(decimal.Decimal(str(value)) if isinstance(value, float) else decimal.Decimal(value))
        return text
    if node == ir.Prim("timedelta") and isinstance(value, dt.timedelta):
        seconds = (
            decimal.Decimal(value.days * 86400 + value.seconds) + decimal.Decimal(value.microseconds) / 10**6
        )
        return format(seconds.normalize(), "f")
    wanted = {"date": dt.date, "datetime": dt.datetime, "time": dt.time}.get(getattr(node, "name", ""))
    if wanted is not None and type(value) is wanted and isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return None


def constraint_names(node: ir.TypeNode) -> frozenset[str]:
    """The constraints pydantic applies to a value of ``node``'s type (others are dropped)."""
    if isinstance(node, ir.Annotated):
        node = node.type
    if node in (ir.Prim("int"), ir.Prim("float")):
        return frozenset(_BOUNDS)
    if node == ir.Prim("decimal"):
        return frozenset({*_BOUNDS, "max_digits", "decimal_places"})
    if node == ir.Prim("str"):
        return frozenset({"min_length", "max_length", "pattern"})
    if node in (ir.Prim("datetime"), ir.Prim("time")):
        return frozenset({"tz", "gt", "ge", "lt", "le"})
    if node in (ir.Prim("timedelta"), ir.Prim("date")):
        return frozenset({"gt", "ge", "lt", "le"})
    if isinstance(node, ir.Seq | ir.Dict) or node == ir.Prim("bytes"):
        return frozenset({"min_length", "max_length"})
    return frozenset()


def discriminator(metadata: tuple[Any, ...] | list[Any]) -> str | None:
    """The field a pydantic discriminated union is told apart by (``Field(discriminator=...)``
    or ``Discriminator("...")``); None for none, or for a callable discriminator."""
    for item in metadata:
        value = getattr(item, "discriminator", None)
        if isinstance(value, pydantic.Discriminator):
            value = value.discriminator
        if isinstance(value, str):
            return value
    return None


def lookup(table: Mapping[Any, Any], key: Any) -> Any:
    """``table.get(key)``, or None for an unhashable key."""
    try:
        return table.get(key)
    except TypeError:  # unhashable annotation metadata
        return None


def typevar_name(tp: Any) -> str:
    """A type parameter's name in the mirror, with a leading ``_`` (it stays private)."""
    name: str = tp.__name__
    return name if name.startswith("_") else f"_{name}"


def describe(tp: Any) -> str:
    """``module:qualname`` of a class or NewType: its key in problems and type_overrides."""
    module = getattr(tp, "__module__", None) or "?"
    name = getattr(tp, "__qualname__", None) or getattr(tp, "__name__", None) or repr(tp)
    return f"{module}:{name}"


def default_text(value: Any, factory: Any) -> str | None:
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
