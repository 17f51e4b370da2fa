"""What a task may declare, said at registration: argument types akadze cannot store (and what
to use instead), and return annotations whose values are not plain JSON.

A result is stored only when it is plain JSON (akadze.codec.encode_result); any other value
ends the run in ResultNotJson after the body ran, and the run is retried (the spec's outcome
table). A return annotation says at registration what the runs would meet: :func:`non_json`
reads it, without calling anything. No IO but the registration's warning (a logger it is given).
"""

from __future__ import annotations

import collections.abc
import logging
import math
import re
import types
import typing
from typing import Any

import pydantic
import typing_extensions

from akadze.codec.stored import MAX_JSON_DEPTH
from akadze.errors import ConfigError, ResultNotJson

#: the argument types akadze stores, as docs/tasks.md ("Arguments") lists them
SUPPORTED_ARGUMENTS = (
    "str, int, float, bool, None, bytes, datetime, date, time, timedelta, UUID, Decimal, enums, "
    "Literal, pydantic models, dataclasses, TypedDicts, and lists, tuples, sets, dicts and "
    "Optionals of these"
)

#: the result values that are stored: plain JSON
JSON_RESULTS = "dict (str keys), list, tuple, str, int, float, bool or None"

_PLAIN = (str, int, float, bool)
_SEQUENCES = (list, tuple, collections.abc.Sequence, collections.abc.MutableSequence)
_MAPPINGS = (dict, collections.abc.Mapping, collections.abc.MutableMapping)
_WRAPPERS = (typing.Annotated, typing.Required, typing.NotRequired, typing_extensions.ReadOnly)
#: PEP 695 aliases (``type Money = dict[str, int]``), on Pythons that have them
_ALIASES: tuple[type, ...] = tuple(
    kind for kind in (getattr(typing, "TypeAliasType", None), typing_extensions.TypeAliasType) if kind
)


def unsupported_argument(task_name: str, annotations: dict[str, Any], exc: Exception) -> ConfigError:
    """The error for a signature pydantic cannot build a schema for: which argument, its type,
    what akadze supports and how to map the type (not pydantic's advice to allow arbitrary
    types, which akadze refuses: such a value cannot travel as JSON)."""
    culprit = re.search(r"schema for (?:<class '([^']+)'>|(\S+?))\.? ", str(exc))
    held = (culprit.group(1) or culprit.group(2)).rpartition(".")[2] if culprit else "a type"
    for name, annotation in annotations.items():
        try:
            pydantic.TypeAdapter(annotation)
        except pydantic.PydanticSchemaGenerationError:
            where = f"argument {name!r} ({_name(annotation)})"
            break
    else:
        where = "an argument"
    return ConfigError(
        f"task {task_name!r}: {where} holds {held}, which akadze cannot store as JSON. Arguments "
        f"may be {SUPPORTED_ARGUMENTS}. Pass what identifies or describes the {held} instead (an "
        "id, a path, a model of its fields) and build it in the task (docs/tasks.md, Arguments)"
    )


def warn_if_result_not_json(logger: logging.Logger, task_name: str, annotation: Any) -> None:
    """Log a warning at registration when the task's return annotation allows values that are
    not JSON (:func:`non_json`): each of its runs would end in ResultNotJson after its body ran."""
    declared = non_json(annotation)
    if declared is not None:
        logger.warning(
            "task %r is declared to return %s, which is not JSON: a result is stored only when it "
            "is %s, so each run would end in ResultNotJson after its body ran, and be retried. "
            "Return a JSON form (model.model_dump(mode='json'), moment.isoformat()).",
            task_name,
            declared,
            JSON_RESULTS,
        )


def non_json(annotation: Any) -> str | None:
    """The part of a return annotation whose values are not plain JSON (``Receipt``,
    ``datetime``, ``set[int]``, ``int keys``), or None when every value it allows is JSON (or
    it says nothing: ``Any``, no annotation, a type variable, an unresolved name)."""
    return _walk(annotation, set())


def _walk(annotation: Any, seen: set[int]) -> str | None:
    if annotation is Any or annotation is object or annotation is None or annotation is type(None):
        return None
    if annotation in _PLAIN or annotation in (list, tuple, dict):
        return None
    if isinstance(annotation, typing.TypeVar | str | typing.ForwardRef):
        return None
    if isinstance(annotation, typing.NewType):
        return _walk(annotation.__supertype__, seen)
    if isinstance(annotation, _ALIASES):
        return _walk(getattr(annotation, "__value__", Any), seen)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in _WRAPPERS:
        return _walk(args[0], seen)
    if origin is typing.Union or origin is types.UnionType:
        return next((found for arg in args if (found := _walk(arg, seen))), None)
    if origin is typing.Literal:
        odd = [value for value in args if value is not None and type(value) not in _PLAIN]
        return _name(type(odd[0])) if odd else None
    if origin in _SEQUENCES:
        return next((found for arg in args if arg is not Ellipsis and (found := _walk(arg, seen))), None)
    if origin in _MAPPINGS:
        key, value = args if len(args) == 2 else (Any, Any)
        if _walk(key, seen) is not None or (
            key not in (str, Any) and typing.get_origin(key) is not typing.Literal
        ):
            return f"{_name(key)} keys"
        return _walk(value, seen)
    if typing.is_typeddict(annotation):
        if id(annotation) in seen:
            return None
        seen.add(id(annotation))
        try:
            hints = typing.get_type_hints(annotation, include_extras=True)
        except Exception:  # a field that does not resolve here: say nothing of it
            return None
        return next((found for hint in hints.values() if (found := _walk(hint, seen))), None)
    return _name(annotation)


def _name(annotation: Any) -> str:
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__qualname__
    return repr(annotation).replace("typing.", "")


def check_json(value: Any, path: str = "$", depth: int = 0) -> None:
    """Raise ResultNotJson unless ``value`` is plain JSON nested at most MAX_JSON_DEPTH levels
    (what a result may be); ``path`` says where, for the message."""
    kind = type(value)
    if kind is str or kind is bool or kind is int or value is None:
        return
    if kind is float:
        if not math.isfinite(value):
            raise ResultNotJson("non-finite float", path)
        return
    if kind is list or kind is tuple or kind is dict:
        if depth >= MAX_JSON_DEPTH:
            raise ResultNotJson(f"value nested deeper than {MAX_JSON_DEPTH} levels", path)
    if kind is list or kind is tuple:
        for index, item in enumerate(value):
            check_json(item, f"{path}[{index}]", depth + 1)
        return
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                raise ResultNotJson(f"{type(key).__qualname__} key", path)
            check_json(item, f"{path}.{key}", depth + 1)
        return
    raise ResultNotJson(kind.__qualname__, path)
