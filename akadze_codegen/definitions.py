"""The mirror definitions of worker classes: pydantic models, dataclasses, TypedDicts,
NamedTuples, enums and NewTypes, read from the live objects.

Each builder takes the Walker (for the types of fields and for problems), the class and its
definition key; mirror.Walker calls them the first time it meets a class.
"""

from __future__ import annotations

import dataclasses
import enum
import keyword
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

import pydantic

from akadze_codegen import signature as ir
from akadze_codegen.typetables import default_text, is_tag, mentions, typeddict_required, typevar_name

if TYPE_CHECKING:
    from akadze_codegen.mirror import Walker


def pydantic_struct(walker: Walker, cls: type[pydantic.BaseModel], key: str, where: str) -> ir.Definition:
    """A pydantic model: its ``model_fields`` under their validation aliases; excluded fields left out."""
    config = cls.model_config
    validators = field_validators(cls)
    fields: list[ir.Field] = []
    for name, info in cls.model_fields.items():
        here = f"{key}.{name}"
        wire = wire_name(walker, info, name, here)
        required = info.is_required()
        if info.exclude is True:
            if required:
                walker.problem(
                    here,
                    "a required field with exclude=True is never stored in a job",
                    "give it a default, or drop exclude=True",
                )
            continue
        annotation: Any = info.annotation
        metadata = [*info.metadata, *([info] if info.discriminator is not None else [])]
        if metadata:
            annotation = typing.Annotated[(annotation, *metadata)]
        node, checks = walker.noted(annotation, here, validators.get(name, ()))
        base64 = (config.get("val_json_bytes"), config.get("ser_json_bytes")) == ("base64", "base64")
        if mentions(node, ir.Prim("bytes")) and not base64:
            # reading UTF-8 corrupts what clients send; writing UTF-8 corrupts (or cannot
            # write) what the worker-side enqueue stores
            walker.problem(
                here,
                "bytes travel as base64, but this model reads or writes JSON bytes as UTF-8 "
                "text, so they would arrive corrupted",
                'add model_config = ConfigDict(val_json_bytes="base64", '
                'ser_json_bytes="base64") to the model',
            )
        default = None if required else default_text(info.default, info.default_factory)
        fields.append(
            ir.Field(
                name=name,
                wire=wire,
                type=node,
                required=required,
                literal_default=not required and is_tag(node, info.default),
                default=default,
                checks=checks,
            )
        )
    params = cls.__pydantic_generic_metadata__["parameters"]
    return _struct_def(
        key,
        "pydantic",
        fields,
        params,
        forbid_unknown=config.get("extra") == "forbid",
        checks=model_checks(cls),
    )


def field_validators(cls: Any) -> dict[str, list[str]]:
    """``validator <name>`` per field, for the ``@field_validator``s of a pydantic class."""
    found: dict[str, list[str]] = {}
    decorators = getattr(cls, "__pydantic_decorators__", None)
    if decorators is None:
        return found
    for name, decorator in decorators.field_validators.items():
        for field in decorator.info.fields:
            found.setdefault(field, []).append(f"validator {name}")
    return found


def model_checks(cls: Any) -> list[str]:
    """``model validator <name>`` for the ``@model_validator``s of a pydantic class."""
    decorators = getattr(cls, "__pydantic_decorators__", None)
    if decorators is None:
        return []
    return [f"model validator {name}" for name in decorators.model_validators]


def wire_name(walker: Walker, info: Any, name: str, where: str) -> str:
    """The key a pydantic field is read from: its validation alias, else its alias, else its name."""
    alias = info.validation_alias
    if isinstance(alias, pydantic.AliasChoices):
        alias = alias.choices[0]
    if isinstance(alias, pydantic.AliasPath):
        walker.problem(
            where,
            "validation_alias=AliasPath(...) reads a nested path, which a mirror cannot write",
            "use a plain alias, or put the first choice of AliasChoices as a string",
        )
        return name
    if isinstance(alias, str):
        return alias
    return info.alias if isinstance(info.alias, str) else name


def dataclass_struct(walker: Walker, cls: type, key: str, where: str) -> ir.Definition:
    """A dataclass (stdlib or pydantic): its ``__init__`` fields, ``InitVar`` included."""
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:
        walker.problem(key, f"cannot resolve the field types ({type(exc).__name__}: {exc})")
        hints = {}
    pydantic_fields: dict[str, Any] = getattr(cls, "__pydantic_fields__", None) or {}
    validators = field_validators(cls)
    fields: list[ir.Field] = []
    all_fields: dict[str, Any] = getattr(cls, "__dataclass_fields__", {})
    for name, field in all_fields.items():
        kind = getattr(field, "_field_type", None)
        if kind is getattr(dataclasses, "_FIELD_CLASSVAR", object()) or not field.init:
            continue
        here = f"{key}.{name}"
        info = pydantic_fields.get(name)
        annotation: Any = hints.get(name, Any)
        if info is not None and (info.metadata or info.discriminator is not None):
            extra = [info] if info.discriminator is not None else []
            annotation = typing.Annotated[(info.annotation, *info.metadata, *extra)]
        node, checks = walker.noted(annotation, here, validators.get(name, ()))
        has_default = field.default is not dataclasses.MISSING or (
            field.default_factory is not dataclasses.MISSING
        )
        default_value = field.default if field.default is not dataclasses.MISSING else None
        factory = None if field.default_factory is dataclasses.MISSING else field.default_factory
        fields.append(
            ir.Field(
                name=name,
                wire=wire_name(walker, info, name, here) if info is not None else name,
                type=node,
                required=not has_default,
                literal_default=has_default and is_tag(node, default_value),
                default=default_text(default_value, factory) if has_default else None,
                checks=checks,
            )
        )
    params = getattr(cls, "__parameters__", ())
    # a pydantic dataclass has its own config (extra="ignore" unless it says otherwise); a
    # stdlib one takes the config of where it is used: forbid in a task's arguments, which is
    # where the mirror assumes it is (inside a model that ignores extra fields, the guard is
    # then stricter than the worker about a field the producer should not send anyway)
    config = getattr(cls, "__pydantic_config__", None)
    extra = (config or {}).get("extra", "forbid" if config is None else "ignore")
    return _struct_def(
        key, "dataclass", fields, params, forbid_unknown=extra == "forbid", checks=model_checks(cls)
    )


def _struct_def(
    key: str,
    source: Literal["pydantic", "dataclass"],
    fields: list[ir.Field],
    params: Iterable[Any],
    *,
    forbid_unknown: bool,
    checks: list[str],
) -> ir.StructDef:
    return ir.StructDef(
        name="",
        origin=key,
        source=source,
        fields=fields,
        type_params=[typevar_name(p) for p in params],
        forbid_unknown=forbid_unknown,
        checks=checks,
    )


def typeddict_def(walker: Walker, cls: Any, key: str, where: str) -> ir.Definition:
    """A TypedDict: its keys with their requiredness."""
    hints = typing.get_type_hints(cls, include_extras=True)
    fields = _fields(walker, key, hints, hints, lambda name, tp: typeddict_required(cls, name, tp))
    return ir.TypedDictDef(name="", origin=key, fields=fields)


def namedtuple_def(walker: Walker, cls: Any, key: str, where: str) -> ir.Definition:
    """A NamedTuple: an array on the wire, every field required."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return ir.NamedTupleDef(
        name="", origin=key, fields=_fields(walker, key, hints, cls._fields, lambda *_: True)
    )


def _fields(
    walker: Walker,
    key: str,
    hints: Mapping[str, Any],
    names: Iterable[str],
    required: Callable[[str, Any], bool],
) -> list[ir.Field]:
    """Fields named as on the wire, typed from ``hints`` (Any where a name has none)."""
    return [
        ir.Field(
            name=name,
            wire=name,
            type=walker.walk(hints.get(name, Any), f"{key}.{name}"),
            required=required(name, hints.get(name, Any)),
        )
        for name in names
    ]


def enum_def(walker: Walker, cls: type[enum.Enum], key: str, where: str) -> ir.Definition:
    """An enum: its base and its members (aliases included) in declaration order."""
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
            walker.problem(
                f"{key}.{name}",
                f"enum value {value!r} is not a str or int",
                "use str or int values for enums in task arguments",
            )
            continue
        if not name.isidentifier() or keyword.iskeyword(name):
            walker.problem(f"{key}.{name}", f"enum member name {name!r} is not an identifier")
            continue
        members.append((name, value))
    return ir.EnumDef(name="", origin=key, base=base, members=members)


def newtype_def(walker: Walker, tp: Any, key: str, where: str) -> ir.Definition:
    """A NewType over its supertype."""
    return ir.NewTypeDef(name="", origin=key, type=walker.walk(tp.__supertype__, key))
