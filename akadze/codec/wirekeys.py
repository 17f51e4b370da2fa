"""The keys a stored model is read back from: what the worker-side enqueue writes for pydantic
models and dataclasses whose serialization differs from their validation.

A job's arguments are validated again when the worker runs it, so every object must carry the
keys validation reads: a field's *validation* alias (the first of ``AliasChoices``), else its
alias, else its name. pydantic serializes ``by_alias`` under the *serialization* alias, which
may differ (``serialization_alias=``, an ``AliasGenerator`` with two functions); msgspec
encodes a dataclass under its field names, whatever its aliases; and a ``computed_field`` is
serialized but is no input (a model with ``extra="forbid"`` refuses it). Generated clients write
the validation keys and no computed field, so the worker-side enqueue writes the same row.

Models without any of this (the usual case) keep the fast path: pydantic's own JSON, in Rust.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

import pydantic


def wire_key(name: str, validation_alias: Any) -> str:
    """The key validation reads for a field, from its core schema's ``validation_alias``."""
    if isinstance(validation_alias, str):
        return validation_alias
    if isinstance(validation_alias, list) and validation_alias:
        first = validation_alias[0]  # AliasChoices: [[choice, ...path], ...]; AliasPath: [k, ...]
        if isinstance(first, list) and len(first) == 1 and isinstance(first[0], str):
            return first[0]
        if isinstance(first, str) and len(validation_alias) == 1:
            return first
    return name


def _fields(node: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    fields = node.get("fields")
    if isinstance(fields, Mapping):
        return [(name, f) for name, f in fields.items() if isinstance(f, Mapping)]
    if isinstance(fields, list):
        return [(f["name"], f) for f in fields if isinstance(f, Mapping) and "name" in f]
    return []


def schema_differs(schema: Any, *, dataclasses_by_name: bool = False) -> bool:
    """Whether a core schema holds a field serialized under another key than validation reads,
    or a computed field. With ``dataclasses_by_name``, a dataclass field counts by its name
    (how msgspec encodes a dataclass) rather than its serialization alias."""
    if isinstance(schema, list):
        return any(schema_differs(item, dataclasses_by_name=dataclasses_by_name) for item in schema)
    if not isinstance(schema, Mapping):
        return False
    kind = schema.get("type")
    if kind in ("model-fields", "dataclass-args"):
        if schema.get("computed_fields"):
            return True
        for name, field in _fields(schema):
            written = name if dataclasses_by_name and kind == "dataclass-args" else None
            written = written or field.get("serialization_alias") or name
            if written != wire_key(name, field.get("validation_alias")):
                return True
    return any(
        schema_differs(value, dataclasses_by_name=dataclasses_by_name)
        for key, value in schema.items()
        if key not in ("metadata", "serialization", "ref", "cls", "validator", "function")
    )


@functools.cache
def rekeyed_class(cls: type) -> bool:
    """Whether instances of the pydantic model or dataclass ``cls`` need :func:`to_wire`."""
    schema = getattr(cls, "__pydantic_core_schema__", None)
    try:
        return schema_differs(schema)
    except Exception:  # a schema shape not foreseen: keep pydantic's own serialization
        return False


def to_wire(value: Any) -> Any:
    """A pydantic model or dataclass as JSON-ready data under the keys validation reads."""
    dumped = type(value).__pydantic_serializer__.to_python(value, mode="json", by_alias=True)
    return _rekey(value, dumped)


def dataclasses_to_wire(value: Any) -> Any:
    """``value`` with each pydantic dataclass in it (msgspec would encode it under its field
    names) made JSON-ready data under its validation keys; models are left to the encoder."""
    if isinstance(value, pydantic.BaseModel):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if hasattr(type(value), "__pydantic_serializer__"):
            return to_wire(value)
        return {f.name: dataclasses_to_wire(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {key: dataclasses_to_wire(item) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [dataclasses_to_wire(item) for item in value]
    return value


def _rekey(value: Any, dumped: Any) -> Any:
    """``dumped`` (pydantic's JSON-mode output for ``value``) with every object's keys made the
    validation keys, walking the Python value alongside for the fields' definitions."""
    if isinstance(value, pydantic.RootModel):
        return _rekey(value.root, dumped)
    fields: Mapping[str, Any] | None = None
    if isinstance(value, pydantic.BaseModel):
        fields = type(value).model_fields
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = getattr(type(value), "__pydantic_fields__", None) or {
            f.name: None for f in dataclasses.fields(value)
        }
    if fields is not None:
        if not isinstance(dumped, dict):
            return dumped  # a custom serializer changed the shape: as pydantic wrote it
        out: dict[str, Any] = {}
        for name, info in fields.items():
            written = (getattr(info, "serialization_alias", None) or name) if info is not None else name
            if written in dumped:
                out[_field_key(name, info)] = _rekey(getattr(value, name, None), dumped[written])
        return out
    if isinstance(value, Mapping) and isinstance(dumped, dict) and len(value) == len(dumped):
        return {key: _rekey(item, dumped[key]) for key, item in zip(dumped, value.values(), strict=True)}
    if isinstance(value, list | tuple | set | frozenset) and isinstance(dumped, list):
        if len(value) == len(dumped):
            return [_rekey(item, out) for item, out in zip(value, dumped, strict=True)]
    return dumped


def _field_key(name: str, info: Any) -> str:
    if info is None:
        return name
    alias = info.validation_alias
    if isinstance(alias, pydantic.AliasChoices):
        alias = alias.choices[0]
    if isinstance(alias, str):
        return alias
    return info.alias if isinstance(info.alias, str) else name
