"""Flow control options: Unique (one job per key) and Limit (concurrency and rate per task or key).

Pure: the declaration checks and the unique key are functions of the options, the task's
signature and the stored JSON; the database enforces both (db/sql/enqueue_unique.sql, a unique
index; db/sql/claim_limited.sql, permit rows). See docs/flow-control.md.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import hashlib
import inspect
import types
import typing
import uuid
from collections.abc import Collection, Mapping, Sequence, Set as AbstractSet
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import Any

import msgspec

from akadze.errors import ConfigError
from akadze.job import JobState

#: the states in which a job blocks another with its key when Unique(states=None)
DEFAULT_UNIQUE_STATES: frozenset[JobState] = frozenset({JobState.QUEUED, JobState.RUNNING})

#: what the key material starts with: a change to the key's recipe changes this
_KEY_VERSION = "akadze-unique-1"

_decoder = msgspec.json.Decoder()


@dataclass(frozen=True, slots=True)
class Unique:
    """At most one job per key: enqueueing a duplicate returns the existing job.

    Args:
        args: the argument names that make two jobs the same (None: all of them; ``()``: none,
            one job of the task at a time). Their stored JSON is compared, canonically (key
            order and spacing do not matter; an argument left out is not the same as one
            given its default value).
        period: a window: jobs enqueued in the same fixed window of this length (counted
            from the Unix epoch on the database's clock) are the same. None: no window.
        states: the job states in which an existing job blocks a new one (None: queued and
            running). They must include queued and running, so that no transition the worker
            makes (a retry, a snooze, a rescue) can meet a conflict.

    Example: ``@app.task("report.build", unique=Unique(args=["account_id"]))``.
    """

    args: Sequence[str] | None = None
    period: timedelta | None = None
    states: Collection[JobState | str] | None = None

    @property
    def blocking_states(self) -> list[str]:
        """The states as the database stores them, sorted."""
        states = DEFAULT_UNIQUE_STATES if self.states is None else self.states
        return sorted(JobState(state).value for state in states)

    @property
    def period_s(self) -> float | None:
        """``period`` in seconds for the enqueue statement, or None without a window."""
        return None if self.period is None else self.period.total_seconds()


@dataclass(frozen=True, slots=True)
class Limit:
    """A ceiling on the task's jobs across every worker, enforced where jobs are claimed.

    Args:
        concurrency: at most this many jobs of the task running at once.
        rate: at most this many starts in any window of length ``per`` (a sliding window).
        per: the window of ``rate``, a positive timedelta.
        key: an argument's name: the limit then holds per distinct value of that argument
            (jobs that leave it out share one group), and the keys are served in a fair order
            (round robin: the first job of every key before the second of any). ``key`` alone,
            with neither ``concurrency`` nor ``rate``, is a fair share without a ceiling: a key
            with a large backlog never keeps another key's jobs waiting behind it.

    A job held back stays queued, holds no slot and spends no attempt; it is parked out of the
    claim index until its group has room, so held jobs never slow the claim of other jobs. A
    limit is a ceiling, never a reservation.

    Example: ``@app.task("api.call", limit=Limit(concurrency=2, key="account_id"))``;
    ``@app.task("import.rows", limit=Limit(key="tenant_id"))`` (fair share only).
    """

    concurrency: int | None = None
    rate: int | None = None
    per: timedelta | None = None
    key: str | None = None


def arguments_of(fn: Any, signature: inspect.Signature) -> dict[str, Any]:
    """The task's argument names and annotations (``inspect.Parameter.empty`` when untyped)."""
    # the codec decides where a callable keeps its hints (a partial, a callable instance)
    from akadze.codec import _hinted

    try:
        hints = typing.get_type_hints(_hinted(fn))
    except Exception:  # the codec has already resolved them once; untyped then
        hints = {}
    return {name: hints.get(name, inspect.Parameter.empty) for name in signature.parameters}


_Options = typing.TypeVar("_Options")


def checked(task: str, options: _Options, fn: Any, signature: inspect.Signature) -> _Options:
    """``options`` (a TaskOptions) with its ``unique`` and ``limit`` checked against the task's
    signature and normalized; a ConfigError naming the task and the fix otherwise."""
    params = arguments_of(fn, signature)
    unique = check_unique(task, getattr(options, "unique", None), params)
    limit = check_limit(task, getattr(options, "limit", None), params)
    # TaskOptions, a dataclass (flow does not import task.py, which imports it)
    return dataclasses.replace(options, unique=unique, limit=limit)  # type: ignore[type-var]


def check_unique(task: str, unique: object, params: Mapping[str, Any]) -> Unique | None:
    """``unique`` normalized (args a sorted tuple, states a frozenset), or a ConfigError that
    names the task and the fix. ``params``: argument name -> annotation."""
    if unique is None:
        return None
    if not isinstance(unique, Unique):
        raise ConfigError(
            f"task {task!r}: unique must be akadze.Unique(...), got {type(unique).__qualname__}"
        )
    args = unique.args
    if args is not None:
        if isinstance(args, str) or not isinstance(args, Collection):
            raise ConfigError(
                f"task {task!r}: Unique(args=...) takes a list of argument names, got {args!r}; "
                f"write args=[{args!r}]"
                if isinstance(args, str)
                else f"task {task!r}: Unique(args=...) takes a list of argument names, got {args!r}"
            )
        for name in args:
            _check_argument(task, "Unique(args=...)", name, params)
        args = tuple(sorted(set(args)))
    names = list(params) if args is None else args
    for name in names:
        _check_stable(task, "Unique", name, params[name])
    period = unique.period
    if period is not None and (not isinstance(period, timedelta) or period <= timedelta(0)):
        raise ConfigError(f"task {task!r}: Unique(period=...) must be a positive timedelta, got {period!r}")
    states: frozenset[JobState] | None = None
    if unique.states is not None:
        if isinstance(unique.states, str) or not isinstance(unique.states, Collection):
            raise ConfigError(
                f"task {task!r}: Unique(states=...) takes a list of JobState, got {unique.states!r}"
            )
        try:
            states = frozenset(JobState(state) for state in unique.states)
        except ValueError:
            raise ConfigError(
                f"task {task!r}: Unique(states=...) names an unknown state "
                f"in {sorted(map(str, unique.states))}; "
                f"states are {', '.join(s.value for s in JobState)}"
            ) from None
        if not DEFAULT_UNIQUE_STATES <= states:
            raise ConfigError(
                f"task {task!r}: Unique(states=...) must include queued and running (a retry or a "
                "rescue moves a job between them and must never meet a conflict); add them"
            )
    return Unique(args=args, period=period, states=states)


def check_limit(task: str, limit: object, params: Mapping[str, Any]) -> Limit | None:
    """``limit`` as given, or a ConfigError that names the task and the fix."""
    if limit is None:
        return None
    if not isinstance(limit, Limit):
        raise ConfigError(f"task {task!r}: limit must be akadze.Limit(...), got {type(limit).__qualname__}")
    if limit.concurrency is None and limit.rate is None and limit.key is None:
        raise ConfigError(
            f"task {task!r}: Limit needs concurrency=N, rate=N with per=timedelta(...), "
            "or key= alone (a fair share between the key's values, without a ceiling)"
        )
    for label, value in (("concurrency", limit.concurrency), ("rate", limit.rate)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(
                f"task {task!r}: Limit({label}=...) must be an integer of 1 or more, got {value!r}"
            )
    if limit.rate is not None and limit.per is None:
        raise ConfigError(
            f"task {task!r}: Limit(rate={limit.rate}) needs per=, the window, say per=timedelta(seconds=1)"
        )
    if limit.per is not None:
        if limit.rate is None:
            raise ConfigError(f"task {task!r}: Limit(per=...) applies to rate=; add rate=N or drop per")
        if not isinstance(limit.per, timedelta) or limit.per <= timedelta(0):
            raise ConfigError(
                f"task {task!r}: Limit(per=...) must be a positive timedelta, got {limit.per!r}"
            )
    if limit.key is not None:
        if not isinstance(limit.key, str):
            raise ConfigError(f"task {task!r}: Limit(key=...) is one argument's name, got {limit.key!r}")
        _check_argument(task, "Limit(key=...)", limit.key, params)
        _check_stable(task, "Limit", limit.key, params[limit.key])
    return limit


class LimitParams(msgspec.Struct, frozen=True):
    """The limits of a worker's tasks as claim_limited.sql takes them: one item per task."""

    tasks: list[str]
    keys: list[str | None]
    concurrency: list[int | None]
    rate: list[int | None]
    per_s: list[float | None]


def limit_params(limits: Mapping[str, Limit]) -> LimitParams | None:
    """task name -> its Limit, as claim parameters; None without any (the plain claim runs)."""
    if not limits:
        return None
    names = sorted(limits)
    return LimitParams(
        tasks=names,
        keys=[limits[name].key for name in names],
        concurrency=[limits[name].concurrency for name in names],
        rate=[limits[name].rate for name in names],
        per_s=[None if (per := limits[name].per) is None else per.total_seconds() for name in names],
    )


def unique_key(task: str, unique: Unique, payload: str) -> str:
    """The key of a job of ``task`` whose stored arguments are ``payload`` (JSON text).

    A hash of the task name, the window's length and the chosen arguments' canonical JSON
    (keys sorted, no spaces). The database appends the window's number when there is a
    period. Generated clients compute it with this same function from the same JSON.
    """
    stored = _decoder.decode(payload)
    if unique.args is not None:
        stored = {name: stored[name] for name in unique.args if name in stored}
    material = msgspec.json.encode([_KEY_VERSION, task, unique.period_s, stored], order="sorted")
    return hashlib.blake2b(material, digest_size=16).hexdigest()


def _check_argument(task: str, where: str, name: object, params: Mapping[str, Any]) -> None:
    if not isinstance(name, str) or name not in params:
        known = ", ".join(params) or "none"
        raise ConfigError(
            f"task {task!r}: {where} names {name!r}, which the task does not take (its arguments: {known})"
        )


# -- stable JSON forms --------------------------------------------------------------------

#: types whose equal values always have one JSON form
_STABLE = (str, int, bool, type(None), uuid.UUID, dt.date, dt.datetime, dt.time, bytes, enum.Enum)
#: types with equal values of several JSON forms, and why
_UNSTABLE: dict[Any, str] = {
    float: "a float (1 and 1.0 are the same value, not the same JSON)",
    Decimal: "a Decimal (1.0 and 1.00 are the same value, not the same JSON)",
    set: "a set (its JSON order is not stable)",
    frozenset: "a frozenset (its JSON order is not stable)",
    Any: "untyped (Any)",
    object: "untyped (object)",
}


#: ``type X = ...`` aliases (Python 3.12+)
_TypeAliasType: Any = getattr(typing, "TypeAliasType", None)


def _check_stable(task: str, option: str, name: str, annotation: Any) -> None:
    reason = _unstable(annotation, set())
    if reason is not None:
        raise ConfigError(
            f"task {task!r}: {option} uses argument {name!r}, whose type has no stable JSON form: {reason}; "
            f"give it a type such as str, int, UUID or an enum, or leave it out of {option}"
        )


def _unstable(annotation: Any, seen: set[int]) -> str | None:
    if annotation is inspect.Parameter.empty:
        return _UNSTABLE[Any]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unstable(typing.get_args(annotation)[0], seen)
    if hasattr(annotation, "__supertype__"):  # NewType
        return _unstable(annotation.__supertype__, seen)
    if _TypeAliasType is not None and isinstance(annotation, _TypeAliasType):
        return _unstable(annotation.__value__, seen)
    if origin is typing.Literal:
        return None
    try:
        if annotation in _UNSTABLE:
            return _UNSTABLE[annotation]
    except TypeError:  # unhashable annotation objects
        pass
    if origin is not None:
        if isinstance(origin, type) and issubclass(origin, AbstractSet):
            return _UNSTABLE[set]
        if origin in _UNSTABLE:
            return _UNSTABLE[origin]
        for arg in typing.get_args(annotation):
            if arg is Ellipsis:
                continue
            reason = _unstable(arg, seen)
            if reason is not None:
                return reason
        return None
    if isinstance(annotation, types.UnionType):
        for arg in typing.get_args(annotation):
            reason = _unstable(arg, seen)
            if reason is not None:
                return reason
        return None
    if not isinstance(annotation, type):
        return None
    if issubclass(annotation, _STABLE):
        return None
    if issubclass(annotation, AbstractSet):
        return _UNSTABLE[set]
    for unstable, reason in _UNSTABLE.items():
        if isinstance(unstable, type) and unstable is not object and issubclass(annotation, unstable):
            return reason
    if id(annotation) in seen:
        return None
    seen.add(id(annotation))
    for field_type in _fields(annotation):
        reason = _unstable(field_type, seen)
        if reason is not None:
            return reason
    return None


def _fields(cls: type) -> list[Any]:
    """The field types of a pydantic model, dataclass, TypedDict or msgspec Struct."""
    model_fields = getattr(cls, "model_fields", None)
    if isinstance(model_fields, Mapping):
        return [field.annotation for field in model_fields.values()]
    if dataclasses.is_dataclass(cls) or typing.is_typeddict(cls) or issubclass(cls, msgspec.Struct):
        try:
            return list(typing.get_type_hints(cls).values())
        except Exception:  # unresolvable forward references: the codec has vetted the type
            return []
    return []
