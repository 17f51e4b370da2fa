"""The JSON schema a task's argument fingerprint is taken over: pydantic's, plus the constraints
pydantic enforces but leaves out of JSON schema (a Decimal's ``max_digits`` and
``decimal_places``; the bounds of a duration, date, datetime or time), so that tightening one
changes the fingerprint and ``codegen --check``, ``diff`` and ``verify`` see it.

The extra keys appear only where such a constraint is set: every other schema, and so every
other fingerprint, is what pydantic alone gives.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping
from typing import Any

from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue

_BOUNDS = ("gt", "ge", "lt", "le")


def _text(value: Any) -> Any:
    if isinstance(value, dt.timedelta):
        return str(
            decimal.Decimal(value.days * 86400 + value.seconds) + decimal.Decimal(value.microseconds) / 10**6
        )
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value


def _with(out: JsonSchemaValue, schema: Mapping[str, Any], keys: tuple[str, ...]) -> JsonSchemaValue:
    extra = {f"x-{key}": _text(schema[key]) for key in keys if schema.get(key) is not None}
    return {**out, **extra} if extra else out


class WireSchema(GenerateJsonSchema):
    """pydantic's JSON schema with the constraints it leaves out as ``x-...`` keys."""

    def decimal_schema(self, schema: Any) -> JsonSchemaValue:
        """pydantic's decimal schema, plus ``x-max_digits`` and ``x-decimal_places`` where set."""
        return _with(super().decimal_schema(schema), schema, ("max_digits", "decimal_places"))

    def timedelta_schema(self, schema: Any) -> JsonSchemaValue:
        """pydantic's timedelta schema, plus the bounds set (``x-gt`` ... ``x-le``) in seconds."""
        return _with(super().timedelta_schema(schema), schema, _BOUNDS)

    def date_schema(self, schema: Any) -> JsonSchemaValue:
        """pydantic's date schema, plus the bounds set (``x-gt`` ... ``x-le``) in ISO form."""
        return _with(super().date_schema(schema), schema, _BOUNDS)

    def datetime_schema(self, schema: Any) -> JsonSchemaValue:
        """pydantic's datetime schema, plus the bounds set (``x-gt`` ... ``x-le``) in ISO form."""
        return _with(super().datetime_schema(schema), schema, _BOUNDS)

    def time_schema(self, schema: Any) -> JsonSchemaValue:
        """pydantic's time schema, plus the bounds set (``x-gt`` ... ``x-le``) in ISO form."""
        return _with(super().time_schema(schema), schema, _BOUNDS)
