"""Periodic schedules (cron or interval). Placeholder until the schedules issue lands."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from akadze.errors import ConfigError


@dataclass(frozen=True)
class Schedule:
    name: str
    task: Any
    cron: str | None
    every: timedelta | None
    args: dict[str, Any]
    tz: str

    @classmethod
    def create(
        cls,
        name: str,
        task: Any,
        *,
        cron: str | None,
        every: timedelta | None,
        args: dict[str, Any],
        tz: str | None,
    ) -> Schedule:
        if (cron is None) == (every is None):
            raise ConfigError(f"schedule {name!r}: pass exactly one of cron or every")
        return cls(name, task, cron, every, args, tz or "UTC")
