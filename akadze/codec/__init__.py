"""Task arguments and results on the wire.

A task's signature becomes a pydantic-validated TypedDict: arguments are validated at enqueue,
encoded to JSON by msgspec, and validated again at run (pydantic, JSON mode), so rich types
(nested models, dataclasses, datetime, UUID, Decimal, enums...) arrive as those types.
Only the arguments the caller gave are stored: an omitted one takes the worker's current default.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import inspect
import ipaddress
import math
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import PurePath
from typing import Any, Literal, NotRequired, Required, TypeAlias
from uuid import UUID

import msgspec
import pydantic
import pydantic_core
from pydantic import ConfigDict, TypeAdapter
from typing_extensions import TypedDict

from akadze.codec.jsontypes import check_json, unsupported_argument
from akadze.codec.stored import MAX_JSON_DEPTH, check_payload
from akadze.codec.wirekeys import dataclasses_to_wire, rekeyed_class, schema_differs, to_wire
from akadze.codec.wireschema import WireSchema
from akadze.errors import ArgsTooDeepError, ConfigError

#: encoded arguments larger than this are refused at enqueue
DEFAULT_MAX_ARGS_BYTES = 1024 * 1024

#: what a worker does with a stored argument its task does not declare (a producer newer than
#: the worker): refuse the job (the default), or drop the argument and run it. Enqueue always
#: refuses unknown arguments; the policy applies to decoding at run time only.
UnknownArgs: TypeAlias = Literal["forbid", "ignore"]
UNKNOWN_ARGS_POLICIES: tuple[UnknownArgs, ...] = ("forbid", "ignore")

_ARGS_CONFIG = ConfigDict(
    extra="forbid",
    ser_json_bytes="base64",
    val_json_bytes="base64",
)


def _enc_hook(obj: Any) -> Any:
    if isinstance(obj, pydantic.BaseModel):
        if rekeyed_class(type(obj)):
            # serialized under other keys than its validation reads (or with computed
            # fields): written under the validation keys, as generated clients write it
            return to_wire(obj)
        # pydantic writes the model's JSON itself (in Rust) and msgspec embeds it as it is;
        # a non-finite float becomes null there, which the scan after encoding refuses
        return msgspec.Raw(obj.__pydantic_serializer__.to_json(obj, by_alias=True))
    if isinstance(obj, _AS_STR):
        return str(obj)  # as pydantic writes them, and generated clients do
    raise NotImplementedError(f"cannot encode {type(obj).__qualname__} as a task argument")


#: argument types whose JSON form is their str(), which pydantic parses back
_AS_STR: tuple[type, ...] = (PurePath, ipaddress.IPv4Address, ipaddress.IPv6Address, ipaddress.IPv4Network)
_AS_STR += (ipaddress.IPv6Network, ipaddress.IPv4Interface, ipaddress.IPv6Interface)


#: the arguments encoder (akadze.codec.batch encodes with it too)
ARGS_ENCODER = msgspec.json.Encoder(enc_hook=_enc_hook, decimal_format="string")
_decoder = msgspec.json.Decoder()


@dataclass(frozen=True, slots=True)
class ArgsCodec:
    """Validation and wire format of one task's arguments."""

    task_name: str
    signature: inspect.Signature
    adapter: TypeAdapter[Any]
    max_bytes: int
    #: whether a value of these types may hold a float (so NaN can hide behind a null)
    may_hold_float: bool = True
    #: whether a dataclass in them has fields read under other keys than their names
    #: (msgspec would write the names): see akadze.codec.wirekeys
    wire_keys: bool = False
    #: whether they hold a pydantic ``Json[T]``, which validation parses from a string and so
    #: must be written back as one: pydantic's round-trip serialization writes them
    json_text: bool = False

    def bind(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Map a call's positional and keyword arguments to parameter names."""
        if not args:
            return dict(kwargs)
        try:
            bound = self.signature.bind_partial(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"task {self.task_name!r}: {exc}") from None
        return dict(bound.arguments)

    def encode(self, kwargs: Mapping[str, Any]) -> str:
        """Validate (pydantic.ValidationError on bad input) and encode to JSON text."""
        try:
            validated = self.adapter.validate_python(dict(kwargs))
        except pydantic.ValidationError as exc:
            raise _without_input(exc) from None
        except RecursionError:
            raise ArgsTooDeepError(self.task_name, MAX_JSON_DEPTH) from None
        return self.encode_validated(validated)

    def encode_validated(self, validated: Mapping[str, Any]) -> str:
        """Encode arguments that pydantic has already validated to the JSON text that is stored, then
        apply every enqueue's checks (size, depth, NUL, NaN or infinity): TypeError, ValueError or
        ArgsTooLargeError/ArgsTooDeepError name the task, never the value."""
        try:
            if self.json_text:
                payload = self.adapter.dump_json(validated, round_trip=True, by_alias=True)
            else:
                payload = ARGS_ENCODER.encode(dataclasses_to_wire(validated) if self.wire_keys else validated)
        except (TypeError, NotImplementedError) as exc:
            raise TypeError(f"task {self.task_name!r}: {exc}") from None
        except RecursionError:
            raise ArgsTooDeepError(self.task_name, MAX_JSON_DEPTH) from None
        except UnicodeEncodeError:
            # msgspec's own error names only a position; the value (kept on the exception)
            # must not travel further
            raise ValueError(
                f"task {self.task_name!r}: an argument contains a lone surrogate, "
                "which is not valid Unicode and cannot be stored"
            ) from None
        check_payload(self.task_name, payload, self.max_bytes)
        if self.may_hold_float and b"null" in payload:
            # msgspec writes NaN and Infinity as null: such a job could never decode its
            # arguments (or would get None), so it is refused here rather than stored
            where = _non_finite(validated, "")
            if where is not None:
                raise ValueError(
                    f"task {self.task_name!r}: argument {where or '(value)'} is NaN or infinite, "
                    "which JSON cannot carry"
                )
        return payload.decode()

    def decode(self, raw: str | bytes) -> dict[str, Any]:
        """Validate stored JSON back into the declared types (pydantic.ValidationError if not)."""
        # the core validator itself: TypeAdapter.validate_json only passes its defaults on,
        # and this runs once per job a worker runs
        value: dict[str, Any] = self.adapter.validator.validate_json(raw)
        return value

    def split_unknown(self, stored: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """The stored arguments the signature declares, and the names of the others, sorted.

        What ``unknown_args="ignore"`` decodes: the same as validating with the arguments'
        ``extra="ignore"`` (nested models keep their own ``extra`` policy), and the names are
        there to be logged. A partial's keyword-bound arguments count as unknown.
        """
        declared = self.signature.parameters
        unknown = sorted(name for name in stored if name not in declared)
        if not unknown:
            return dict(stored), []
        return {name: value for name, value in stored.items() if name in declared}, unknown

    @property
    def fingerprint(self) -> str:
        """The schema fingerprint of the task's arguments (schema_fingerprint): stored on each job
        (``args_fp``) and compared with the worker's to tell a stale producer; builds the JSON schema
        on each read, so the Task keeps it."""
        return schema_fingerprint(self.adapter.json_schema(schema_generator=WireSchema))


_SCALARS = frozenset({str, int, bool, type(None), bytes, Decimal, UUID, datetime, date, time, timedelta})


def _without_input(exc: pydantic.ValidationError) -> pydantic.ValidationError:
    """The same error, naming the fields and the problems but not the values: callers log
    errors, and arguments may hold secrets."""
    details = [
        pydantic_core.InitErrorDetails(
            type=pydantic_core.PydanticCustomError(e["type"], e["msg"]), loc=e["loc"], input=e["input"]
        )
        if "ctx" not in e
        else pydantic_core.InitErrorDetails(type=e["type"], loc=e["loc"], input=e["input"], ctx=e["ctx"])
        for e in exc.errors(include_url=False, include_context=True)
    ]
    return pydantic_core.ValidationError.from_exception_data(exc.title, details, hide_input=True)


def _non_finite(value: Any, path: str) -> str | None:
    """The path of the first NaN or infinite float inside ``value``, or None.

    Runs only when the encoded arguments contain ``null`` (where msgspec writes NaN), so it
    is kept cheap: exact type checks first, and the path is built only for the value found.
    """
    found = _find_non_finite(value)
    if found is None:
        return None
    return path + "".join(reversed(found)).lstrip(".")


def _find_non_finite(value: Any) -> list[str] | None:
    kind = type(value)
    if kind is float:
        return None if math.isfinite(value) else []
    if kind in _SCALARS or isinstance(value, enum.Enum):
        return None
    if kind is dict or isinstance(value, Mapping):
        pairs: Any = value.items()
    elif kind is list or kind is tuple or isinstance(value, list | tuple | set | frozenset):
        pairs = enumerate(value)
    elif isinstance(value, pydantic.BaseModel):
        pairs = value.__dict__.items()
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        pairs = ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
    elif isinstance(value, float):
        return None if math.isfinite(value) else []
    else:
        return None
    for key, item in pairs:
        found = _find_non_finite(item)
        if found is not None:
            found.append(f"[{key}]" if isinstance(key, int) and not isinstance(value, Mapping) else f".{key}")
            return found
    return None


def _hinted(fn: Callable[..., Any]) -> Any:
    """Where ``fn``'s annotations live: a functools.partial's function, a callable instance's
    ``__call__``; the signature (bound arguments and ``self`` left out) comes from ``fn`` itself."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if not (inspect.isfunction(fn) or inspect.ismethod(fn)) and callable(getattr(fn, "__call__", None)):  # noqa: B004
        return type(fn).__call__
    return fn


def _keyword_bound(fn: Callable[..., Any]) -> set[str]:
    names: set[str] = set()
    while isinstance(fn, functools.partial):
        names.update(fn.keywords)
        fn = fn.func
    return names


def build_codec(
    task_name: str, fn: Callable[..., Any], *, max_bytes: int = DEFAULT_MAX_ARGS_BYTES
) -> ArgsCodec:
    """Build the argument codec from ``fn``'s signature; bad signatures are a ConfigError."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"task {task_name!r}: cannot read the signature: {exc}") from None
    try:
        hints = typing.get_type_hints(_hinted(fn), include_extras=True)
    except Exception as exc:  # NameError for unresolved forward references, and others
        raise ConfigError(
            f"task {task_name!r}: cannot resolve the type hints ({type(exc).__name__}: {exc}); "
            "import the types the signature names at module level"
        ) from None
    # a partial's keyword-bound arguments stay in its signature (as defaults) but are
    # dependencies, not job arguments: a job must not override them
    bound = _keyword_bound(fn)
    if bound:
        signature = signature.replace(
            parameters=[p for p in signature.parameters.values() if p.name not in bound]
        )
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigError(
                f"task {task_name!r}: *args and **kwargs cannot be stored as a job's arguments; "
                "declare each argument by name"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ConfigError(
                f"task {task_name!r}: positional-only parameter {param.name!r} is not supported; "
                "jobs pass arguments by name"
            )
        annotation = hints.get(param.name, Any)
        wrap = Required if param.default is inspect.Parameter.empty else NotRequired
        fields[param.name] = wrap[annotation]
    typed_dict = TypedDict(f"{_identifier(task_name)}_args", fields)  # type: ignore[misc]
    typed_dict.__pydantic_config__ = _ARGS_CONFIG  # type: ignore[attr-defined]
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(typed_dict)
    except pydantic.PydanticSchemaGenerationError as exc:
        raise unsupported_argument(
            task_name, {n: typing.get_args(f)[0] for n, f in fields.items()}, exc
        ) from None
    try:
        # the fingerprint is built from the JSON schema: a type pydantic validates but cannot
        # describe (arbitrary_types_allowed) cannot travel as JSON either
        adapter.json_schema(schema_generator=WireSchema)
    except pydantic.PydanticUserError as exc:
        raise ConfigError(
            f"task {task_name!r}: an argument type has no JSON form ({exc}); use JSON-friendly "
            "types (pydantic models, dataclasses, datetime, UUID, Decimal...)"
        ) from None
    # a float (or Any, which may be one) anywhere in the validation schema, nested models
    # included; without one, a null in the payload cannot be a NaN and needs no scan
    core = repr(adapter.core_schema)
    may_hold_float = "'float'" in core or "'any'" in core or "'json'" in core
    wire_keys = "'dataclass-args'" in core and schema_differs(adapter.core_schema, dataclasses_by_name=True)
    json_text = "'type': 'json'" in core
    return ArgsCodec(task_name, signature, adapter, max_bytes, may_hold_float, wire_keys, json_text)


def _identifier(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name) or "task"


def schema_fingerprint(schema: Mapping[str, Any]) -> str:
    """A short hash of the wire shape of a JSON schema (Avro's "parsing canonical form" idea).

    Unchanged by docs, titles, examples, default values, Python class names (``$defs`` are
    inlined; a recursive reference becomes its depth), property order, union order and enum or
    literal value order. Changed by a wire name, requiredness, a type, a constraint or an
    enum/literal value set. Generated clients embed exactly this value (``task.args_fp``).
    """
    defs = schema.get("$defs", {})
    canonical = _canonical(schema, defs if isinstance(defs, Mapping) else {}, ())
    digest = hashlib.sha256(msgspec.json.encode(canonical, order="sorted")).hexdigest()
    return digest[:16]


#: schema keywords that do not change what validates
_IGNORED_KEYS = frozenset(
    {"title", "description", "default", "examples", "$defs", "deprecated", "readOnly", "writeOnly"}
)
#: keywords whose value maps names (properties, never keywords) to schemas
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "dependentSchemas"})
#: keywords whose list order carries no meaning
_UNORDERED = frozenset({"required", "enum", "anyOf", "oneOf", "allOf", "type"})


def _sort_key(value: Any) -> bytes:
    return msgspec.json.encode(value, order="sorted")


def _canonical(node: Any, defs: Mapping[str, Any], stack: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_canonical(v, defs, stack) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in stack:
            # a recursive reference: its distance up the stack, not its class name
            return {"$rec": len(stack) - stack.index(name)}
        target = defs.get(name, {})
        rest = {k: v for k, v in node.items() if k != "$ref"}
        inlined = _canonical(target, defs, (*stack, name))
        return {**inlined, **_canonical(rest, defs, stack)} if rest else inlined
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _IGNORED_KEYS:
            continue
        if key in _NAMED_SCHEMAS and isinstance(value, dict):
            out[key] = {name: _canonical(v, defs, stack) for name, v in value.items()}
        elif key == "discriminator" and isinstance(value, dict):
            # the mapping's targets are $defs names; the tag values are in the variants
            out[key] = value.get("propertyName")
        else:
            out[key] = _canonical(value, defs, stack)
    for key in _UNORDERED:
        if isinstance(out.get(key), list):
            out[key] = sorted(out[key], key=_sort_key)
    return out


def encode_result(value: Any) -> str | None:
    """Encode a task's return value; anything but plain JSON (nested at most MAX_JSON_DEPTH
    levels) raises ResultNotJson."""
    if value is None:
        return None
    check_json(value)
    return ARGS_ENCODER.encode(value).decode()


def encode_json(value: Any) -> str:
    """JSON text of a stored value (arguments, a result) as akadze encodes arguments, for the CLI
    and akadze.testing to print or compare; TypeError for a value that is not JSON."""
    return ARGS_ENCODER.encode(value).decode()
