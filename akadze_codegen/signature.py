"""The manifest: the intermediate representation between discovery and emission.

Plain msgspec Structs, encoded to ``_manifest.json`` in the generated package. It holds
everything rendering needs, so ``--from-manifest`` renders without importing the worker (nor
pydantic). Type nodes are a tagged union (``"k"``); definitions another (``"kind"``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, TypeAlias

import msgspec

#: bumped when the manifest's shape changes incompatibly
FORMAT = 1

#: names of the leaf types; "none" is None, "any" is typing.Any
PrimName = Literal[
    "any",
    "bool",
    "bytes",
    "date",
    "datetime",
    "decimal",
    "float",
    "int",
    "none",
    "str",
    "time",
    "timedelta",
    "uuid",
    # str on the wire; the mirror also takes the Python type the worker receives
    "path",
    "ipv4address",
    "ipv6address",
    "ipaddress",
    "ipv4network",
    "ipv6network",
    "ipnetwork",
    "ipv4interface",
    "ipv6interface",
    "ipinterface",
]


class Prim(msgspec.Struct, frozen=True, tag="prim", tag_field="k"):
    """A leaf type (:data:`PrimName`)."""

    name: PrimName


class Seq(msgspec.Struct, frozen=True, tag="seq", tag_field="k"):
    """list, set, frozenset, Sequence, or a tuple of any length (``tuple[T, ...]``)."""

    kind: Literal["list", "set", "frozenset", "sequence", "tuple"]
    item: TypeNode


class Tuple(msgspec.Struct, frozen=True, tag="tuple", tag_field="k"):
    """A tuple of fixed length, one type per position."""

    items: list[TypeNode]


class Dict(msgspec.Struct, frozen=True, tag="dict", tag_field="k"):
    """``dict[K, V]``; ``mapping`` for ``Mapping`` (read-only on the producer's side)."""

    key: TypeNode
    value: TypeNode
    mapping: bool = False


class Union(msgspec.Struct, frozen=True, tag="union", tag_field="k", omit_defaults=True):
    """A union of its members; with ``discriminator``, a pydantic discriminated union."""

    members: list[TypeNode]
    #: a pydantic discriminated union: the wire name of the field whose value picks the member
    discriminator: str | None = None


class EnumMember(msgspec.Struct, frozen=True):
    """A member of a mirrored enum, by the enum's mirror name and the member's name."""

    enum: str
    member: str


LiteralValue: TypeAlias = str | int | bool | EnumMember | None


class Lit(msgspec.Struct, frozen=True, tag="literal", tag_field="k"):
    """A ``Literal`` of its values."""

    values: list[LiteralValue]


class Ref(msgspec.Struct, frozen=True, tag="ref", tag_field="k"):
    """A mirrored definition by its mirror name, with type arguments when it is generic."""

    name: str
    args: list[TypeNode] = []


class Var(msgspec.Struct, frozen=True, tag="var", tag_field="k"):
    """A type parameter of the generic definition it appears in."""

    name: str


#: a bound: a number for int and float; for the types whose bounds are not JSON numbers, text:
#: a Decimal as its exact string, a timedelta as its total seconds (a decimal string), a date,
#: datetime or time in ISO 8601
Bound: TypeAlias = int | float | str


class Constraints(msgspec.Struct, frozen=True, omit_defaults=True):
    """Every constraint pydantic enforces on a value. Those ``msgspec.Meta`` can carry are
    rendered as one; the others (Decimal bounds, ``max_digits``, ``decimal_places``, bounds of
    durations and dates) as ``akadze.client.Constraints``, which the client's guard checks."""

    gt: Bound | None = None
    ge: Bound | None = None
    lt: Bound | None = None
    le: Bound | None = None
    multiple_of: Bound | None = None
    pattern: str | None = None
    min_length: int | None = None
    max_length: int | None = None
    tz: bool | None = None
    max_digits: int | None = None
    decimal_places: int | None = None


class Annotated(msgspec.Struct, frozen=True, tag="annotated", tag_field="k"):
    """A type with the constraints the worker enforces on it."""

    type: TypeNode
    meta: Constraints


class Json(msgspec.Struct, frozen=True, tag="json", tag_field="k"):
    """pydantic's ``Json[T]``: the worker reads a JSON *string* and parses it as ``type``, so
    producers pass the JSON text (as the worker-side ``enqueue`` takes it)."""

    type: TypeNode


TypeNode: TypeAlias = Prim | Seq | Tuple | Dict | Union | Lit | Ref | Var | Annotated | Json


def map_children(node: TypeNode, f: Callable[[TypeNode], TypeNode]) -> TypeNode:
    """``node`` with ``f`` applied to each of its direct child types; a leaf comes back as is."""
    if isinstance(node, Seq):
        return Seq(node.kind, f(node.item))
    if isinstance(node, Tuple):
        return Tuple([f(i) for i in node.items])
    if isinstance(node, Dict):
        return Dict(f(node.key), f(node.value), node.mapping)
    if isinstance(node, Union):
        return Union([f(m) for m in node.members], node.discriminator)
    if isinstance(node, Annotated):
        return Annotated(f(node.type), node.meta)
    if isinstance(node, Json):
        return Json(f(node.type))
    if isinstance(node, Ref) and node.args:
        return Ref(node.name, [f(a) for a in node.args])
    return node


class Field(msgspec.Struct, frozen=True, omit_defaults=True):
    """A field of a mirrored class: its Python name in the mirror and its name on the wire."""

    name: str
    wire: str
    type: TypeNode
    required: bool
    #: the type is a one-value Literal and the worker defaults to it (a discriminator tag):
    #: the mirror keeps that default, so the tag is always on the wire
    literal_default: bool = False
    #: the worker's default, for the docs only; never emitted as a value
    default: str | None = None
    #: what the worker checks that no client can (a validator, a date in the future), for the docs
    checks: list[str] = []


class StructDef(msgspec.Struct, frozen=True, tag="struct", tag_field="kind", omit_defaults=True):
    """A pydantic model or dataclass, mirrored as a keyword-only ``msgspec.Struct``."""

    name: str
    origin: str
    source: Literal["pydantic", "dataclass"]
    fields: list[Field]
    type_params: list[str] = []
    #: the model refuses fields it does not declare (``extra="forbid"``)
    forbid_unknown: bool = False
    #: what the worker checks of the whole model that no client can (model validators)
    checks: list[str] = []


class TypedDictDef(msgspec.Struct, frozen=True, tag="typeddict", tag_field="kind"):
    """A TypedDict, mirrored with the same keys and requiredness."""

    name: str
    origin: str
    fields: list[Field]


class NamedTupleDef(msgspec.Struct, frozen=True, tag="namedtuple", tag_field="kind"):
    """A NamedTuple, mirrored as one (an array on the wire)."""

    name: str
    origin: str
    fields: list[Field]


class EnumDef(msgspec.Struct, frozen=True, tag="enum", tag_field="kind"):
    """Members in declaration order; an alias (a duplicate value) is listed under its name."""

    name: str
    origin: str
    base: Literal["enum", "str", "int", "strenum", "intenum", "flag", "intflag"]
    members: list[tuple[str, str | int]]


class NewTypeDef(msgspec.Struct, frozen=True, tag="newtype", tag_field="kind"):
    """A NewType over its supertype."""

    name: str
    origin: str
    type: TypeNode


Definition: TypeAlias = StructDef | TypedDictDef | NamedTupleDef | EnumDef | NewTypeDef


class Param(msgspec.Struct, frozen=True, omit_defaults=True):
    """A task parameter: its name (the key it travels under), type, requiredness and the
    worker's default (docs only)."""

    name: str
    type: TypeNode
    required: bool
    default: str | None = None
    #: what the worker checks that no client can (a validator, a date in the future), for the docs
    checks: list[str] = []


class UniqueSpec(msgspec.Struct, frozen=True, omit_defaults=True):
    """The task's akadze.Unique: generated clients compute the same key (akadze.flow)."""

    #: the argument names that make the key, sorted (None: all of them)
    args: list[str] | None = None
    #: the window in seconds (None: no window)
    period_s: float | None = None
    #: the blocking states, sorted
    states: list[str] = msgspec.field(default_factory=list)


class LimitSpec(msgspec.Struct, frozen=True, omit_defaults=True):
    """The task's akadze.Limit, for the record: workers enforce it, producers need nothing. A
    key with neither concurrency nor rate is a fair share between the key's values, without a
    ceiling."""

    concurrency: int | None = None
    rate: int | None = None
    per_s: float | None = None
    key: str | None = None


class TaskSignature(msgspec.Struct, frozen=True, omit_defaults=True):
    """One registered task, as producers see it."""

    name: str
    #: the attribute in the generated package (the name with non-identifier characters as _)
    attr: str
    #: the generated module (an included module's last component), or None for __init__
    client: str | None
    queue: str
    priority: int
    max_attempts: int
    #: the worker's argument-schema fingerprint (akadze.codec.schema_fingerprint)
    args_fp: str
    params: list[Param]
    #: the included module that registered the task, for the docs
    module: str | None = None
    doc: str | None = None
    unique: UniqueSpec | None = None
    limit: LimitSpec | None = None
    #: the declared return type: what ``result_of`` decodes a job's result to (None: not
    #: recorded, a manifest of an older akadze; ``Prim("any")`` for an unannotated task)
    returns: TypeNode | None = None
    #: the fingerprint of the return type's schema (akadze.codec.schema_fingerprint)
    result_fp: str | None = None


class ClientModule(msgspec.Struct, frozen=True):
    """An included worker module and the client module generated for it."""

    module: str
    client: str


#: the first key of _manifest.json, so --check can tell a generated manifest from a user's file
NOTICE = "@generated by akadze codegen. DO NOT EDIT."


class Manifest(msgspec.Struct, frozen=True, kw_only=True):
    """The whole intermediate representation: the app, its client modules, tasks and mirrored types."""

    notice: str = NOTICE
    format: int
    #: the app path the clients were generated from (module:attr)
    app: str
    modules: list[ClientModule]
    tasks: list[TaskSignature]
    types: list[Definition]


def encode_manifest(manifest: Manifest) -> bytes:
    """Deterministic, human-diffable JSON (2-space indent, LF, final newline)."""
    return msgspec.json.format(msgspec.json.encode(manifest), indent=2) + b"\n"


def decode_manifest(raw: bytes | str) -> Manifest:
    """A Manifest from JSON; ValueError for a format this akadze does not read."""
    manifest = msgspec.json.decode(raw, type=Manifest)
    if manifest.format != FORMAT:
        raise ValueError(f"manifest format {manifest.format} is not supported (this akadze reads {FORMAT})")
    return manifest
