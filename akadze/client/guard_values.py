"""What the client's guard checks beyond msgspec's own types, and the markers that tell it.

Generated mirrors spell in their annotations what pydantic enforces and ``msgspec.Meta`` cannot
carry: :class:`Discriminator` marks a pydantic discriminated union (its tag field, by wire
name), :class:`Constraints` the bounds of a Decimal, duration, date or time and a Decimal's
``max_digits``/``decimal_places``. Type checkers ignore both (``typing.Annotated`` metadata);
the guard (akadze.client.guard) decodes such places through the stand-in types made here, which
msgspec hands to :func:`dec_hook`:

- a ``Decimal`` takes a JSON string or integer and refuses a JSON float: money must not pass
  through a binary float (``amount=12.1`` is refused; pass ``Decimal("12.1")``); it must be
  finite, and meet its constraints as pydantic counts them;
- a duration, date, datetime or time is parsed as msgspec parses it, then compared with its
  bounds;
- a value whose mirror takes a ``str`` or an ``IPv4Address``, ``IPv6Address``, network,
  interface (the client writes ``str()`` of it) must be a string that the worker's type parses.

Every message names the problem, never the value: arguments may hold secrets.
"""

from __future__ import annotations

import datetime as dt
import decimal
import ipaddress
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import msgspec

__all__ = ["Constraints", "Discriminator", "JsonText"]


@dataclass(frozen=True, slots=True)
class Discriminator:
    """In a mirror's ``Annotated[A | B, Discriminator("kind")]``: a pydantic discriminated union,
    told apart by the field whose wire name is given. The client's guard checks it as one."""

    field: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Constraints:
    """In a mirror's ``Annotated[Decimal, Constraints(gt=Decimal("0"), max_digits=10)]``: what
    the worker's pydantic enforces on the value and ``msgspec.Meta`` cannot carry. Documentation
    for the reader; checked by the client's guard before the insert."""

    gt: Any = None
    ge: Any = None
    lt: Any = None
    le: Any = None
    multiple_of: Any = None
    max_digits: int | None = None
    decimal_places: int | None = None


@dataclass(frozen=True, slots=True)
class JsonText:
    """In a mirror's ``Annotated[str, JsonText()]``: the worker's pydantic ``Json[T]``, which
    reads a JSON *string* and parses it. Producers pass the JSON text (as the worker-side
    ``enqueue`` takes it); the client's guard checks that it is JSON, the worker that it is a T."""


class Checked:
    """Base of the stand-in types the guard decodes through :func:`dec_hook`."""

    #: the type msgspec decodes in its place where a custom type cannot go (a union with
    #: other types than None, a dict key)
    plain: ClassVar[Any] = Any

    @classmethod
    def check(cls, value: Any) -> Any:
        """Check one decoded JSON value, raising ValueError or TypeError (msgspec reports it at its
        path) when the worker would refuse it; each stand-in type made by ``checked`` implements it."""
        raise NotImplementedError


def dec_hook(tp: Any, value: Any) -> Any:
    """msgspec's decode hook for the guard: checks ``value`` with a Checked stand-in type and
    returns a placeholder instance (the guard only checks; it keeps no decoded value). Any other
    type raises NotImplementedError: the guard's types ask for no other."""
    if isinstance(tp, type) and issubclass(tp, Checked):
        tp.check(value)
        return tp()  # msgspec wants an instance of the type it asked for; the guard keeps none
    raise NotImplementedError(f"the guard does not decode {tp!r}")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {bool: "bool", int: "int", float: "float", str: "str", list: "array", dict: "object"}.get(
        type(value), type(value).__name__
    )


def _parse_decimal(value: Any) -> decimal.Decimal:
    if type(value) is str:
        try:
            number = decimal.Decimal(value)
        except (decimal.InvalidOperation, ValueError):
            raise ValueError("Invalid decimal string") from None
    elif type(value) is int:
        number = decimal.Decimal(value)
    elif type(value) is float:
        raise ValueError(
            "Expected `decimal` as a string or an integer, got `float`: a float cannot carry an "
            "exact decimal; pass a Decimal"
        )
    else:
        raise ValueError(f"Expected `decimal`, got `{_kind(value)}`")
    if not number.is_finite():
        raise ValueError("Expected a finite `decimal`")
    return number


def _digits(number: decimal.Decimal) -> tuple[int, int]:
    """(digits, decimal places) as pydantic counts them: of the normalized value, trailing
    zeros of an integer counted as digits."""
    _, digits, exponent = number.normalize().as_tuple()
    assert isinstance(exponent, int)
    if exponent >= 0:
        return len(digits) + exponent, 0
    return max(len(digits), -exponent), -exponent


_OPS: tuple[tuple[str, str, Callable[[Any, Any], bool]], ...] = (
    ("gt", ">", operator.gt),
    ("ge", ">=", operator.ge),
    ("lt", "<", operator.lt),
    ("le", "<=", operator.le),
)


def _bounds(c: Constraints) -> list[tuple[Any, str, Callable[[Any, Any], bool]]]:
    """The bounds ``c`` sets, as (limit, sign, test), worked out once per stand-in type."""
    return [(getattr(c, key), sign, test) for key, sign, test in _OPS if getattr(c, key) is not None]


def _check_decimal(number: decimal.Decimal, c: Constraints, bounds: list[Any]) -> None:
    _check_bounds(number, bounds, "decimal")
    if c.multiple_of is not None and number % decimal.Decimal(c.multiple_of) != 0:
        raise ValueError(f"Expected `decimal` that is a multiple of {c.multiple_of}")
    if c.max_digits is None and c.decimal_places is None:
        return
    digits, places = _digits(number)
    if c.max_digits is not None and digits > c.max_digits:
        raise ValueError(f"Expected `decimal` with at most {c.max_digits} digits")
    if c.decimal_places is not None:
        if places > c.decimal_places:
            raise ValueError(f"Expected `decimal` with at most {c.decimal_places} decimal places")
        if c.max_digits is not None and digits - places > c.max_digits - c.decimal_places:
            whole = c.max_digits - c.decimal_places
            raise ValueError(f"Expected `decimal` with at most {whole} digits before the point")


def _check_bounds(value: Any, bounds: list[tuple[Any, str, Callable[[Any, Any], bool]]], what: str) -> None:
    for limit, sign, test in bounds:
        try:
            passed = test(value, limit)
        except TypeError:  # an aware and a naive datetime: left to the worker
            continue
        if not passed:
            raise ValueError(f"Expected `{what}` {sign} {_show(limit)}")


def _show(limit: Any) -> str:
    if isinstance(limit, dt.timedelta):
        return str(msgspec.json.encode(limit).decode().strip('"'))
    if isinstance(limit, dt.date | dt.time):
        return limit.isoformat()
    return str(limit)


_TIME_TYPES: dict[type, str] = {
    dt.timedelta: "duration",
    dt.datetime: "datetime",
    dt.date: "date",
    dt.time: "time",
}


def checked(base: Any, constraints: Constraints | None, target: Any = None) -> type[Checked] | None:
    """The stand-in type for ``base`` (Decimal, or a duration, date or time with
    ``constraints``, parsed as ``target``, its annotated type), or None when msgspec's own type
    checks it all."""
    c = constraints or Constraints()
    bounds = _bounds(c)
    if base is decimal.Decimal:
        plain = constraints is None

        def check_decimal(cls: type[Checked], value: Any) -> Any:
            number = _parse_decimal(value)
            if not plain:
                _check_decimal(number, c, bounds)
            return number

        return type("Decimal", (Checked,), {"plain": decimal.Decimal, "check": classmethod(check_decimal)})
    what = _TIME_TYPES.get(base)
    if what is None or constraints is None:
        return None

    def check_time(cls: type[Checked], value: Any) -> Any:
        try:
            parsed = msgspec.convert(value, target or base)
        except msgspec.ValidationError as exc:
            raise ValueError(str(exc).partition(" - at ")[0]) from None
        _check_bounds(parsed, bounds, what)
        return parsed

    return type(base.__name__, (Checked,), {"plain": base, "check": classmethod(check_time)})


#: the Python types a mirror takes besides ``str`` for a value the worker parses from a string,
#: and what the guard calls it
STR_LIKE: dict[type, str] = {
    ipaddress.IPv4Address: "an IPv4 address",
    ipaddress.IPv6Address: "an IPv6 address",
    ipaddress.IPv4Network: "an IPv4 network",
    ipaddress.IPv6Network: "an IPv6 network",
    ipaddress.IPv4Interface: "an IPv4 interface",
    ipaddress.IPv6Interface: "an IPv6 interface",
}


def str_like(parsers: tuple[type, ...]) -> type[Checked]:
    """The stand-in for a string the worker parses as one of ``parsers`` (IP types)."""
    names = " or ".join(STR_LIKE[p] for p in parsers)

    def check(cls: type[Checked], value: Any) -> Any:
        if type(value) is not str:
            raise ValueError(f"Expected `str`, got `{_kind(value)}`")
        for parse in parsers:
            try:
                parse(value)
            except ValueError:
                continue
            return value
        raise ValueError(f"Expected `str` holding {names}")

    return type("StrLike", (Checked,), {"plain": str, "check": classmethod(check)})


def _check_json_text(cls: type[Checked], value: Any) -> Any:
    if type(value) is not str:
        raise ValueError(f"Expected `str` holding JSON, got `{_kind(value)}`")
    try:
        msgspec.json.decode(value)
    except msgspec.DecodeError:
        raise ValueError("Expected `str` holding JSON") from None
    return value


#: the stand-in for a ``JsonText`` string
JSON_TEXT: type[Checked] = type(
    "JsonText", (Checked,), {"plain": str, "check": classmethod(_check_json_text)}
)
