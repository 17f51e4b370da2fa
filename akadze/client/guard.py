"""The argument guard of generated producer clients: a msgspec check of the JSON about to be
stored, against the task's argument TypedDict and its mirrors, before any row is written.

Decoding the bytes the worker will read checks types (strictly: a string is not a number, a
bool not an int), enum and literal values, requiredness of Struct fields and ``msgspec.Meta``
constraints at any depth. Where msgspec cannot decode a mirrored type as it is, the guard
decodes an equivalent (:func:`_loosen`); the worker's validation has the last word.
"""

from __future__ import annotations

import decimal
import enum
import logging
import types
import typing
from collections.abc import Collection, Mapping, Sequence
from pathlib import PurePath
from typing import Annotated, Any, Literal, NotRequired, Required, Union

import msgspec
import typing_extensions

from akadze.client.guard_values import (
    JSON_TEXT,
    STR_LIKE,
    Checked,
    Constraints,
    Discriminator,
    JsonText,
    checked,
    dec_hook,
    str_like,
)
from akadze.errors import InvalidArgsError

__all__ = ["Constraints", "Discriminator", "Guard", "InvalidArgsError", "JsonText"]

logger = logging.getLogger("akadze.client")


class Guard:
    """The msgspec decoder of one task's argument TypedDict, built on first use.

    Decoding the JSON about to be stored checks what the worker will read: types (strictly: a
    string is not a number, a bool not an int), enum and literal values, requiredness of Struct
    fields, ``msgspec.Meta`` constraints. Where msgspec cannot decode a mirrored type as it is,
    the guard checks an equivalent or looser one (:func:`_loosen`): a ``Literal`` of enum
    members becomes a literal of their values, a union marked :class:`Discriminator` (a
    pydantic discriminated union) a msgspec tagged union, a Decimal, a value with
    :class:`Constraints` or an IP string a checked stand-in (akadze.client.guard_values), and what is
    left a looser type, down to ``Any``. The worker's validation has the last word.
    """

    __slots__ = ("_args_type", "_decoder", "_task")

    def __init__(self, task: str, args_type: object) -> None:
        self._task = task
        self._args_type = args_type
        #: None until built; False when there is nothing to check with
        self._decoder: msgspec.json.Decoder[Any] | Literal[False] | None = None

    def check(self, payload: bytes) -> None:
        """Check the encoded arguments ``payload`` before the row is written (the decoder is built on
        the first call); InvalidArgsError naming the task, the problem and where, never the value."""
        decoder = self._decoder
        if decoder is None:
            decoder = self._decoder = self._build()
        if decoder is False:
            return
        problem = None
        try:
            decoder.decode(payload)
        except msgspec.ValidationError as exc:
            # kept apart from the raise below, so the error (which may quote the value) is not
            # chained to the one callers see
            problem = str(exc)
        if problem is not None:
            what, path, in_key = _redacted(problem)
            raise InvalidArgsError(self._task, what, path, in_key=in_key)

    def _build(self) -> msgspec.json.Decoder[Any] | Literal[False]:
        if not typing_extensions.is_typeddict(self._args_type):
            return False  # a hand-made RemoteTask without a TypedDict: names only, if any
        try:
            return msgspec.json.Decoder(_loosen(self._args_type, set()), dec_hook=dec_hook)
        except Exception as exc:  # the guard must not stop an enqueue the worker would take
            logger.warning(
                "task %r: the argument guard cannot be built (%s: %s); its arguments are "
                "checked by the worker only",
                self._task,
                type(exc).__name__,
                exc,
            )
            return False


def _redacted(message: str) -> tuple[str, str | None, bool]:
    """(problem, path, in a key) from a msgspec validation message, without the value it
    may quote."""
    problem, at, path = message.rpartition(" - at `")
    if not at:
        problem, path = message, ""
    for prefix in ("Invalid enum value", "Invalid value"):
        if problem.startswith(prefix):
            problem = prefix  # "Invalid enum value 'purple'": the value goes
    path = path.removesuffix("`")
    in_key = path.startswith("key` in `")  # "... - at `key` in `$.by_int`"
    return problem, path.removeprefix("key` in `") or None, in_key


#: stand-ins the guard uses for a type msgspec cannot decode: any JSON object, any array
_OBJECT: Any = dict[str, Any]
_ARRAY: Any = list[Any]
#: generic origins rebuilt with loosened arguments
_CONTAINERS = frozenset(
    {
        list,
        set,
        frozenset,
        tuple,
        dict,
        Sequence,
        Mapping,
        Collection,
        typing.get_origin(typing.MutableSequence[int]),
        typing.get_origin(typing.MutableMapping[str, int]),
        typing.get_origin(typing.AbstractSet[int]),
        typing.get_origin(typing.MutableSet[int]),
    }
)


def _decodable(tp: Any) -> bool:
    try:
        msgspec.json.Decoder(tp, dec_hook=dec_hook)
    except Exception:  # TypeError for an unsupported type; NameError for an unresolved one
        return False
    return True


def _loosen(tp: Any, busy: set[Any]) -> Any:
    """``tp`` if msgspec decodes it, else a type msgspec decodes that accepts what ``tp``
    accepts on the wire: a literal of enum members becomes a literal of their values; a union
    marked :class:`Discriminator` becomes a tagged union on its field; a Decimal, a value with
    :class:`Constraints` or an IP string becomes a checked stand-in, even where msgspec would
    decode the type as it is (a float for a Decimal, a bound it cannot express); another union
    msgspec cannot tell apart merges its objects into one ``dict[str, Any]`` and its arrays
    into one ``list[Any]``; a class holding such a part is rebuilt around it; what is left
    becomes ``Any``. ``busy`` holds the classes being rebuilt (recursion)."""
    if _decodable(tp) and not _needs_checks(tp, set()):
        return tp
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Annotated:
        return _loosened_annotated(tp, args[0], tp.__metadata__, busy)
    if origin is Literal:
        values = tuple(value.value if isinstance(value, enum.Enum) else value for value in args)
        literal = Literal[values]  # type: ignore[valid-type]
        return literal if _decodable(literal) else Any
    if origin is Union or origin is types.UnionType:
        return _loosened_union(list(args), busy)
    if tp is decimal.Decimal:
        return checked(decimal.Decimal, None)
    if isinstance(tp, typing.NewType):
        return _loosen(tp.__supertype__, busy)
    if origin in _CONTAINERS and args:
        rebuilt = origin[tuple(arg if arg is Ellipsis else _loosen(arg, busy) for arg in args)]
        return rebuilt if _decodable(rebuilt) else _stand_in(tp)
    cls = origin or tp
    if not isinstance(cls, type):
        return Any
    if issubclass(cls, PurePath):
        return str
    if cls in STR_LIKE:
        return str_like((cls,))
    if tp in busy:
        return _stand_in(tp)  # a recursive reference: checked one level less deep
    busy.add(tp)
    try:
        if issubclass(cls, msgspec.Struct):
            rebuilt = _loosened_struct(tp, cls, busy)
        elif typing_extensions.is_typeddict(cls):
            rebuilt = _loosened_typeddict(cls, busy)
        elif issubclass(cls, tuple) and hasattr(cls, "_fields"):  # a NamedTuple
            hints = typing.get_type_hints(cls)
            items = tuple(_loosen(hints[name], busy) for name in cls._fields)
            rebuilt = types.GenericAlias(tuple, items) if items else _ARRAY
        else:
            rebuilt = Any
    except Exception:  # unresolved annotations and the like: the shape alone
        rebuilt = _stand_in(tp)
    finally:
        busy.discard(tp)
    return rebuilt if _decodable(rebuilt) else _stand_in(tp)


def _loosened_struct(
    tp: Any, cls: type[msgspec.Struct], busy: set[Any], tag: tuple[str, str | int] | None = None
) -> Any:
    """A copy of the Struct ``tp`` with its fields loosened; with ``tag`` (wire name, value),
    that literal field becomes the copy's msgspec tag."""
    config = cls.__struct_config__
    fields: list[tuple[str, Any, Any]] = []
    for info in msgspec.structs.fields(tp):  # a generic Struct's with its parameters applied
        if tag is not None and info.encode_name == tag[0]:
            continue
        default = msgspec.NODEFAULT if info.required else None  # never used: only checks
        fields.append(
            (info.name, _loosen(info.type, busy), msgspec.field(default=default, name=info.encode_name))
        )
    return msgspec.defstruct(
        cls.__name__,
        fields,
        kw_only=True,
        tag=config.tag if tag is None else tag[1],
        tag_field=config.tag_field if tag is None else tag[0],
        array_like=config.array_like,
        forbid_unknown_fields=config.forbid_unknown_fields,
    )


def _loosened_annotated(tp: Any, base: Any, metadata: tuple[Any, ...], busy: set[Any]) -> Any:
    """An annotated type: a :class:`Discriminator`'s union as a msgspec tagged union, a
    :class:`Constraints`' type as its checked stand-in, msgspec's own metadata kept."""
    if any(isinstance(m, JsonText) for m in metadata):
        return JSON_TEXT
    marker = next((m for m in metadata if isinstance(m, Discriminator)), None)
    limits = next((m for m in metadata if isinstance(m, Constraints)), None)
    others = tuple(m for m in metadata if not isinstance(m, Discriminator | Constraints))
    if marker is not None and typing.get_origin(base) in (Union, types.UnionType):
        members = [_loosen(arg, busy) for arg in typing.get_args(base)]
        tagged = _tagged(members, marker.field, busy)
        if tagged is not None:
            union = Union[tuple(tagged)]  # type: ignore[valid-type]  # noqa: UP007
            if _decodable(union):
                return union
    if limits is not None:
        target = Annotated[(base, *others)] if others else base
        stand_in = checked(base, limits, target)
        if stand_in is not None:
            return stand_in
    inner = _loosen(base, busy)
    if not others:
        return inner
    annotated = Annotated[(inner, *others)]  # type: ignore[valid-type]
    return annotated if _decodable(annotated) else inner


def _loosened_union(args: list[Any], busy: set[Any]) -> Any:
    """A union: a ``str`` with the IP types the mirror also takes becomes one checked string;
    then its members loosened, as they are if msgspec decodes them as a union, else with
    checked stand-ins made plain, else with objects and arrays merged; else ``Any``."""
    parsers = tuple(a for a in args if a in STR_LIKE)
    if parsers and str in args:
        args = [a for a in args if a not in parsers and a is not str]
        args.insert(0, str_like(parsers))
    if str in args:
        args = [a for a in args if not (isinstance(a, type) and issubclass(a, PurePath))]
    members = [_loosen(arg, busy) for arg in args]
    plain = [m.plain if isinstance(m, type) and issubclass(m, Checked) else m for m in members]
    for candidate in (members, plain, _merged(plain)):
        union = Union[tuple(dict.fromkeys(candidate))]  # type: ignore[valid-type]  # noqa: UP007
        if _decodable(union):
            return union
    return Any


def _tagged(members: list[Any], field: str, busy: set[Any]) -> list[Any] | None:
    """A discriminated union's Structs made msgspec tagged Structs on ``field`` (its wire
    name), each with its one tag value; None when a member cannot be (a tag literal with two
    values, a member that is no Struct)."""
    structs = [m for m in members if _is_object(m) and issubclass(typing.get_origin(m) or m, msgspec.Struct)]
    if len(structs) != len([m for m in members if m is not type(None)]):
        return None
    tags: list[str | int] = []
    for member in structs:
        if (typing.get_origin(member) or member).__struct_config__.tag_field:
            return None
        found = [info for info in msgspec.structs.fields(member) if info.encode_name == field]
        literal = found[0].type if found else None
        values = typing.get_args(literal) if typing.get_origin(literal) is Literal else ()
        if len(values) != 1 or type(values[0]) not in (str, int):
            return None
        tags.append(values[0])
    if len(set(tags)) != len(tags) or len({type(v) for v in tags}) != 1:
        return None
    by_id = dict(zip(map(id, structs), tags, strict=True))
    return [
        _loosened_struct(m, typing.get_origin(m) or m, busy, (field, by_id[id(m)])) if id(m) in by_id else m
        for m in members
    ]


def _needs_checks(tp: Any, seen: set[int]) -> bool:
    """Whether ``tp`` holds anything the guard checks through a stand-in (a Decimal, a marker,
    an IP type), so that a type msgspec decodes as it is must still be rebuilt."""
    if id(tp) in seen:
        return False
    seen.add(id(tp))
    if tp is decimal.Decimal or tp in STR_LIKE:
        return True
    origin = typing.get_origin(tp)
    if origin is Annotated:
        if any(isinstance(m, Discriminator | Constraints | JsonText) for m in tp.__metadata__):
            return True
        return _needs_checks(typing.get_args(tp)[0], seen)
    args = [a for a in typing.get_args(tp) if a is not Ellipsis]
    if origin is not None and any(_needs_checks(a, seen) for a in args):
        return True
    cls = origin or tp
    if not isinstance(cls, type):
        return False
    try:
        if issubclass(cls, msgspec.Struct):
            return any(_needs_checks(info.type, seen) for info in msgspec.structs.fields(tp))
        if typing_extensions.is_typeddict(cls) or (issubclass(cls, tuple) and hasattr(cls, "_fields")):
            hints = typing.get_type_hints(cls, include_extras=True).values()
            return any(_needs_checks(hint, seen) for hint in hints)
    except Exception:
        return False
    return False


def _loosened_typeddict(cls: type, busy: set[Any]) -> Any:
    required: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
    fields: dict[str, Any] = {}
    for name, hint in typing.get_type_hints(cls, include_extras=True).items():
        if typing.get_origin(hint) in (Required, NotRequired):
            hint = typing.get_args(hint)[0]
        wrap = Required if name in required else NotRequired
        fields[name] = wrap[_loosen(hint, busy)]
    return typing.TypedDict(cls.__name__, fields)  # type: ignore[operator]


def _is_object(tp: Any) -> bool:
    cls = typing.get_origin(tp) or tp
    if not isinstance(cls, type):
        return False
    if issubclass(cls, msgspec.Struct):
        return not cls.__struct_config__.array_like
    return typing_extensions.is_typeddict(cls) or issubclass(cls, dict) or cls is Mapping


def _is_array(tp: Any) -> bool:
    cls = typing.get_origin(tp) or tp
    if not isinstance(cls, type):
        return False
    if issubclass(cls, msgspec.Struct):
        return cls.__struct_config__.array_like
    return issubclass(cls, list | tuple | set | frozenset) or cls is Sequence


def _stand_in(tp: Any) -> Any:
    return _OBJECT if _is_object(tp) else _ARRAY if _is_array(tp) else Any


def _merged(members: list[Any]) -> list[Any]:
    """A union's members with every object type made one ``dict[str, Any]`` and every array
    type one ``list[Any]``: msgspec decodes a union with at most one of each."""
    out: list[Any] = []
    for member in members:
        kept = _OBJECT if _is_object(member) else _ARRAY if _is_array(member) else member
        if kept not in out:
            out.append(kept)
    return out
