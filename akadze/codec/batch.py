"""The arguments of many jobs encoded at once (``task.enqueue_many``).

The same result and the same errors as :meth:`ArgsCodec.encode` on each item, with the steps
that cost Python time per item done once for the batch: one validation call for the whole
list (the items as given: the validator copies each into a new dict), the msgspec encodes
and the payload checks (size, nesting, NUL, NaN behind a null) as ``map`` passes and scans
over the batch; the nesting passes only when some item is long enough to nest past the
limit. Whenever a batch check could fail, or the
validation or the encoding raises, the items go through ``encode`` one by one, which raises
exactly what it always raises for the first bad item. Measured in docs/performance.md
("Scale": enqueue).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from itertools import repeat
from typing import Any

import pydantic_core
from pydantic_core import core_schema

from akadze.codec import ARGS_ENCODER, ArgsCodec
from akadze.codec.stored import MAX_JSON_DEPTH

#: a task's argument adapter -> a validator of a list of such arguments (built on first use)
_LISTS: weakref.WeakKeyDictionary[Any, pydantic_core.SchemaValidator] = weakref.WeakKeyDictionary()


def _list_validator(codec: ArgsCodec) -> pydantic_core.SchemaValidator:
    validator = _LISTS.get(codec.adapter)
    if validator is None:
        validator = pydantic_core.SchemaValidator(core_schema.list_schema(codec.adapter.core_schema))
        _LISTS[codec.adapter] = validator
    return validator


def encode_many(codec: ArgsCodec, items: Iterable[Mapping[str, Any]]) -> list[str]:
    """``[codec.encode(item) for item in items]``, faster for a batch of plain arguments."""
    given = list(items)
    if len(given) < 2 or codec.wire_keys:
        return [codec.encode(item) for item in given]
    try:
        # the validator takes any mapping and builds a new dict of each: no copy first
        validated = _list_validator(codec).validate_python(given)
        encoded = list(map(ARGS_ENCODER.encode, validated))
    except Exception:
        # encode raises what it always raises for the first bad item
        return [codec.encode(item) for item in given]
    # C-level passes over the batch (map, not a Python step per item)
    longest = max(map(len, encoded))
    if (
        longest > codec.max_bytes
        or _may_nest_too_deep(encoded, longest)
        or _scan(b",".join(encoded), codec.may_hold_float)
    ):
        return [codec.encode_validated(value) for value in validated]
    return list(map(bytes.decode, encoded))


def _may_nest_too_deep(encoded: list[bytes], longest: int) -> bool:
    """Whether some item may nest deeper than MAX_JSON_DEPTH: then every item takes the exact
    check. A level costs two bytes (its opening and closing bracket), so no item of at most
    twice the limit in bytes can; past that, the bound adds the most brackets of each kind any
    item has, which is never below an item's own count."""
    if longest <= 2 * MAX_JSON_DEPTH:
        return False
    return (
        max(map(bytes.count, encoded, repeat(b"["))) + max(map(bytes.count, encoded, repeat(b"{")))
        > MAX_JSON_DEPTH
    )


def _scan(joined: bytes, may_hold_float: bool) -> bool:
    """Whether some item may hold a NUL (refused) or a NaN written as null: then every item
    takes encode_validated's exact checks."""
    return b"\\u0000" in joined or (may_hold_float and b"null" in joined)
