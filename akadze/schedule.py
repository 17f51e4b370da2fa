"""Periodic schedules (cron or a fixed interval) and their fire times. Pure: no IO, no clock reads.

Cron expressions are parsed and walked by cronsim; this module only picks the zone, turns
every result into UTC, and decides which fire times are due (``due_fire_times``). The worker's
scheduler (akadze/worker/scheduler.py) carries those decisions to the database.

Fire times, as users of cron expect them:

- ``every=N``: the multiples of N since the Unix epoch, in UTC (every 15 minutes fires at :00,
  :15, :30 and :45 of every hour, on every worker, with no coordination). ``tz`` does not apply.
- ``cron=``: 5 fields (minute hour day month weekday) or 6 (second first), or an alias such as
  ``@daily``, evaluated in ``tz`` (an IANA zone, UTC by default). Across daylight-saving changes
  the rules of Debian cron apply (cronsim implements them): an expression with a fixed minute and
  hour (``30 2 * * *``) fires once a day; a time skipped by the spring-forward jump fires at the
  first valid time after it (03:00), and a time that happens twice in the fall-back hour fires at
  its first occurrence only. An expression that runs every hour or more often (``0 * * * *``,
  ``*/15 * * * *``) follows real time: one fire per real hour, so the repeated hour fires twice
  and the skipped hour not at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pydantic
from cronsim import CronSim, CronSimError

from akadze.errors import ConfigError
from akadze.job import check_name

if TYPE_CHECKING:
    from akadze.task import Task

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
#: where registration walks a cron expression from, to prove that it fires at all
_REFERENCE = datetime(2000, 1, 1, tzinfo=UTC)

#: the usual cron aliases, as the plain expressions they stand for (cronsim takes only fields)
CRON_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "@yearly": "0 0 1 1 *",
        "@annually": "0 0 1 1 *",
        "@monthly": "0 0 1 * *",
        "@weekly": "0 0 * * 0",
        "@daily": "0 0 * * *",
        "@midnight": "0 0 * * *",
        "@hourly": "0 * * * *",
    }
)


@dataclass(frozen=True, slots=True)
class Schedule:
    """A task run on a schedule with fixed arguments. Build it with ``app.schedule`` or
    ``@app.periodic``; it is immutable once registered."""

    name: str
    task: Task[Any, Any]
    #: the cron expression as given (aliases included), or None for an interval
    cron: str | None
    every: timedelta | None
    #: the arguments every job of this schedule gets, validated at registration
    args: Mapping[str, Any]
    #: IANA zone name the cron expression is read in ("UTC" for intervals)
    tz: str
    zone: ZoneInfo = field(repr=False, compare=False)
    #: the cron expression cronsim walks (aliases expanded)
    _fields: str | None = field(default=None, repr=False, compare=False)

    @classmethod
    def create(
        cls,
        name: str,
        task: Task[Any, Any],
        *,
        cron: str | None,
        every: timedelta | None,
        args: Mapping[str, Any],
        tz: str | None,
    ) -> Schedule:
        """Validate everything a schedule can get wrong, so that errors surface at registration.

        Raises:
            ConfigError: not exactly one of cron or every; a bad cron expression; an interval
                that is not a positive whole number of seconds; an unknown zone; tz with every;
                arguments that do not fit the task's signature.
        """
        check_name("schedule", name)
        if (cron is None) == (every is None):
            raise ConfigError(f"schedule {name!r}: pass exactly one of cron or every")
        fields: str | None = None
        if every is not None:
            _check_every(name, every)
            if tz is not None:
                raise ConfigError(
                    f"schedule {name!r}: tz applies to cron expressions only; every={every} fires "
                    "at multiples of the interval since the Unix epoch in UTC"
                )
            zone = ZoneInfo("UTC")
        else:
            assert cron is not None
            zone = _zone(name, tz or "UTC")
            fields = _check_cron(name, cron, zone)
        if not isinstance(args, Mapping):
            raise ConfigError(f"schedule {name!r}: args must be a dict of argument names to values")
        try:
            task.codec.encode(args)
        except pydantic.ValidationError as exc:
            raise ConfigError(
                f"schedule {name!r}: args do not fit task {task.name!r}: {_summary(exc)}"
            ) from exc
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"schedule {name!r}: args of task {task.name!r}: {exc}") from exc
        frozen_args = MappingProxyType(dict(args))
        return cls(name, task, cron, every, frozen_args, zone.key, zone, fields)

    @property
    def expression(self) -> str:
        """How the schedule reads in listings: the cron expression, or ``every 15m``."""
        if self.cron is not None:
            return self.cron
        assert self.every is not None
        return f"every {_interval(self.every)}"


def next_fire_after(schedule: Schedule, after: datetime) -> datetime:
    """The first fire time strictly after ``after``, in UTC.

    Raises:
        ValueError: ``after`` is naive.
    """
    _check_aware(after)
    if schedule.every is not None:
        step = schedule.every // _MICROSECOND
        elapsed = (after - _EPOCH) // _MICROSECOND
        return _EPOCH + _MICROSECOND * ((elapsed // step + 1) * step)
    assert schedule._fields is not None
    # cronsim walks wall-clock time in the zone; every result goes back to UTC at once, because
    # aware datetimes that share a tzinfo compare by wall clock, ignoring the DST fold
    walk = CronSim(schedule._fields, after.astimezone(schedule.zone))
    fire: datetime = next(walk).astimezone(UTC)
    # cronsim walks fixed-time expressions in naive wall-clock time: started inside a repeated
    # fall-back hour, its first answer can lie before ``after``
    while fire <= after:
        fire = next(walk).astimezone(UTC)
    return fire


def latest_fire_at_or_before(schedule: Schedule, moment: datetime) -> datetime:
    """The last fire time at or before ``moment``, in UTC."""
    _check_aware(moment)
    if schedule.every is not None:
        step = schedule.every // _MICROSECOND
        elapsed = (moment - _EPOCH) // _MICROSECOND
        return _EPOCH + _MICROSECOND * (elapsed // step * step)
    assert schedule._fields is not None
    # a reverse walk from a moment with microseconds includes the whole second it starts in
    start = (moment + _MICROSECOND).astimezone(schedule.zone)
    if start.fold:
        # inside a repeated fall-back hour, the fixed-time walk reads wall-clock time as its
        # first occurrence: start it after the repeated hour, so that none is passed over
        first_offset, offset = start.replace(fold=0).utcoffset(), start.utcoffset()
        assert first_offset is not None and offset is not None
        start += first_offset - offset
    walk = CronSim(schedule._fields, start, reverse=True)
    fire: datetime = next(walk).astimezone(UTC)
    while fire > moment:
        fire = next(walk).astimezone(UTC)
    return fire


def fire_times(schedule: Schedule, after: datetime, until: datetime, *, limit: int) -> list[datetime]:
    """Up to ``limit`` fire times in (after, until], oldest first, in UTC."""
    found: list[datetime] = []
    moment = after
    while len(found) < limit:
        moment = next_fire_after(schedule, moment)
        if moment > until:
            break
        found.append(moment)
    return found


@dataclass(frozen=True, slots=True)
class Due:
    """What one look at a schedule decided."""

    #: fire times to enqueue now, oldest first
    fire_times: list[datetime]
    #: the first and last fire time skipped for being later than grace, when any was
    skipped: tuple[datetime, datetime] | None = None


def due_fire_times(
    schedule: Schedule,
    *,
    last_fire_at: datetime | None,
    now: datetime,
    grace: timedelta,
    limit: int,
) -> Due:
    """Which fire times to enqueue at ``now`` (the database's clock), given the newest recorded one.

    A fire time is due while it is at most ``grace`` late: it lies in (now - grace, now]. With
    a recorded run, every fire time after it that is still due is returned (a worker that was
    down for less than grace catches up), up to ``limit`` (the rest come at the next look); the
    fire times between it and now - grace are reported as skipped, never returned. Without one
    (a new schedule, or its runs were pruned), only the latest due fire time is returned: a
    schedule does not fire for the time before it existed.
    """
    horizon = now - grace
    if last_fire_at is None:
        latest = latest_fire_at_or_before(schedule, now)
        return Due([latest] if latest > horizon else [])
    skipped = None
    first_missed = next_fire_after(schedule, last_fire_at)
    if first_missed <= horizon:
        skipped = (first_missed, latest_fire_at_or_before(schedule, horizon))
    return Due(fire_times(schedule, max(last_fire_at, horizon), now, limit=limit), skipped)


# -- validation -------------------------------------------------------------------------------


def _check_aware(moment: datetime) -> None:
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError(f"fire times are computed from aware datetimes, got naive {moment!r}")


def _check_every(name: str, every: object) -> None:
    if not isinstance(every, timedelta):
        raise ConfigError(f"schedule {name!r}: every must be a timedelta, got {every!r}")
    if every < timedelta(seconds=1) or every % timedelta(seconds=1):
        raise ConfigError(
            f"schedule {name!r}: every must be a whole number of seconds, 1 or more; got {every}"
        )


def _zone(name: str, tz: object) -> ZoneInfo:
    if not isinstance(tz, str) or not tz:
        raise ConfigError(f"schedule {name!r}: tz must be an IANA zone name such as 'Europe/Berlin'")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"schedule {name!r}: unknown time zone {tz!r}; use an IANA name such as 'Europe/Berlin' "
            "(install the tzdata package where the system has no zone database)"
        ) from None


def _check_cron(name: str, cron: object, zone: ZoneInfo) -> str:
    if not isinstance(cron, str) or not cron.strip():
        raise ConfigError(f"schedule {name!r}: cron must be a non-empty string such as '*/5 * * * *'")
    expression = cron.strip()
    if expression.startswith("@"):
        if expression.lower() not in CRON_ALIASES:
            raise ConfigError(
                f"schedule {name!r}: unknown cron alias {expression!r}; known: {', '.join(CRON_ALIASES)}"
            )
        expression = CRON_ALIASES[expression.lower()]
    try:
        # a walk, not only a parse: an expression that never matches (within cronsim's 50 years)
        # fails here, not in a worker
        next(CronSim(expression, _REFERENCE.astimezone(zone)))
    except CronSimError as exc:
        raise ConfigError(
            f"schedule {name!r}: bad cron expression {cron!r}: {exc}; expected 5 fields "
            "(minute hour day-of-month month day-of-week) or 6 (seconds first)"
        ) from None
    except StopIteration:
        raise ConfigError(f"schedule {name!r}: cron expression {cron!r} never fires") from None
    return expression


def _summary(exc: pydantic.ValidationError) -> str:
    parts = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"]) or "args"
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


def _interval(every: timedelta) -> str:
    seconds = int(every.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
