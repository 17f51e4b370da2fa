"""The argument guard of generated producer clients: a msgspec check of the JSON about to be
stored, against the task's argument TypedDict and its mirrors, before any row is written.

Decoding the bytes the worker will read checks types (strictly: a string is not a number, a
bool not an int), enum and literal values, requiredness of Struct fields and ``msgspec.Meta``
constraints at any depth. Where msgspec cannot decode a mirrored type as it is, the guard
decodes an equivalent (:func:`_loosen`); the worker's validation has the last word.
"""

from __future__ import annotations

import enum
import logging
import types
import typing
from collections.abc import Collection, Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, Required, Union

import msgspec
import typing_extensions

from akadze.errors import InvalidArgsError

__all__ = ["Guard", "InvalidArgsError"]

logger = logging.getLogger("akadze.client")


class Guard:
    """The msgspec decoder of one task's argument TypedDict, built on first use.

    Decoding the JSON about to be stored checks what the worker will read: types (strictly: a
    string is not a number, a bool not an int), enum and literal values, requiredness of Struct
    fields, ``msgspec.Meta`` constraints. Where msgspec cannot decode a mirrored type as it is,
    the guard checks an equivalent or looser one (:func:`_loosen`): a ``Literal`` of enum
    members becomes a literal of their values, a union of Structs told apart by a literal
    field (a pydantic discriminated union) a msgspec tagged union, and what is left a looser
    type, down to ``Any``. The worker's validation has the last word.
    """

    __slots__ = ("_args_type", "_decoder", "_task")

    def __init__(self, task: str, args_type: object) -> None:
        self._task = task
        self._args_type = args_type
        #: None until built; False when there is nothing to check with
        self._decoder: msgspec.json.Decoder[Any] | Literal[False] | None = None

    def check(self, payload: bytes) -> None:
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
            return msgspec.json.Decoder(_loosen(self._args_type, set()))
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
        msgspec.json.Decoder(tp)
    except Exception:  # TypeError for an unsupported type; NameError for an unresolved one
        return False
    return True


def _loosen(tp: Any, busy: set[Any]) -> Any:
    """``tp`` if msgspec decodes it, else a type msgspec decodes that accepts what ``tp``
    accepts on the wire: a literal of enum members becomes a literal of their values; a union
    of Structs told apart by a literal field becomes a tagged union (the one narrowing: an
    object given for it must carry that field, as a mirror Struct always does); another union
    msgspec cannot tell apart merges its objects into one ``dict[str, Any]`` and its arrays
    into one ``list[Any]``; a class holding such a part is rebuilt around it; what is left
    becomes ``Any``. ``busy`` holds the classes being rebuilt (recursion)."""
    if _decodable(tp):
        return tp
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is Annotated:
        inner = _loosen(args[0], busy)
        annotated = Annotated[(inner, *tp.__metadata__)]  # type: ignore[valid-type]
        return annotated if _decodable(annotated) else inner
    if origin is Literal:
        values = tuple(value.value if isinstance(value, enum.Enum) else value for value in args)
        literal = Literal[values]  # type: ignore[valid-type]
        return literal if _decodable(literal) else Any
    if origin is Union or origin is types.UnionType:
        members = [_loosen(arg, busy) for arg in args]
        for candidate in (members, _tagged(members, busy), _merged(members)):
            union = Union[tuple(candidate)]  # type: ignore[valid-type]  # noqa: UP007
            if _decodable(union):
                return union
        return Any
    if isinstance(tp, typing.NewType):
        return _loosen(tp.__supertype__, busy)
    if origin in _CONTAINERS and args:
        rebuilt = origin[tuple(arg if arg is Ellipsis else _loosen(arg, busy) for arg in args)]
        return rebuilt if _decodable(rebuilt) else _stand_in(tp)
    cls = origin or tp
    if not isinstance(cls, type):
        return Any
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


def _literal_fields(tp: Any) -> dict[str, str | int]:
    """The fields of Struct ``tp`` typed with one literal value that is also their default
    (how a mirror spells a discriminated union's tag), by wire name."""
    found: dict[str, str | int] = {}
    for info in msgspec.structs.fields(tp):
        values = typing.get_args(info.type) if typing.get_origin(info.type) is Literal else ()
        if len(values) == 1 and type(values[0]) in (str, int) and info.default == values[0]:
            found[info.encode_name] = values[0]
    return found


def _tagged(members: list[Any], busy: set[Any]) -> list[Any]:
    """A union's untagged Structs made tagged Structs, when one literal field (a pydantic
    discriminator's mirror) tells them apart: msgspec then decodes the union exactly."""
    structs = [m for m in members if _is_object(m) and issubclass(typing.get_origin(m) or m, msgspec.Struct)]
    if len(structs) < 2 or any((typing.get_origin(m) or m).__struct_config__.tag_field for m in structs):
        return members
    try:
        literals = [_literal_fields(m) for m in structs]
    except Exception:
        return members
    for name in sorted(set.intersection(*(set(found) for found in literals))):
        values = [found[name] for found in literals]
        if len(set(values)) == len(values) and len({type(v) for v in values}) == 1:
            tags = dict(zip(map(id, structs), values, strict=True))
            return [
                _loosened_struct(m, typing.get_origin(m) or m, busy, (name, tags[id(m)]))
                if id(m) in tags
                else m
                for m in members
            ]
    return members


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
