"""Retry delays. Pure: the random source is injected, no IO and no clock reads."""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from datetime import timedelta

#: A per-task policy: attempt (spent so far, >= 1) -> delay before the next run.
BackoffPolicy = Callable[[int], timedelta]

#: the default curve stops growing here
DEFAULT_CAP = timedelta(seconds=300)
#: policy delays are clamped into [0, POLICY_MAX]
POLICY_MAX = timedelta(days=365)

logger = logging.getLogger("akadze.backoff")

_rng = random.Random()  # noqa: S311 (jitter, not crypto)


def default_backoff(attempt: int, rng: random.Random | None = None) -> timedelta:
    """2^(attempt-1) seconds, capped at 300 s, jittered into [50 %, 100 %] of that."""
    base = (
        DEFAULT_CAP.total_seconds()
        if attempt > 9
        else min(2.0 ** max(attempt - 1, 0), DEFAULT_CAP.total_seconds())
    )
    factor = 0.5 + 0.5 * (rng or _rng).random()
    return timedelta(seconds=base * factor)


def policy_delay(policy: BackoffPolicy | None, attempt: int, rng: random.Random | None = None) -> timedelta:
    """The delay after a failed attempt: the task's policy, clamped, or the default curve.

    A policy that raises or returns something other than a timedelta falls back to the
    default curve (and says so in the log, once per call).
    """
    if policy is None:
        return default_backoff(attempt, rng)
    try:
        delay: object = policy(attempt)
    except Exception as exc:  # a user's policy may raise anything
        logger.warning("backoff policy raised %s; using the default curve", type(exc).__name__)
        return default_backoff(attempt, rng)
    if not isinstance(delay, timedelta):
        logger.warning(
            "backoff policy returned %s, not a timedelta; using the default curve",
            type(delay).__name__,
        )
        return default_backoff(attempt, rng)
    return clamp_policy_delay(delay)


def clamp_policy_delay(delay: timedelta) -> timedelta:
    """``delay`` held into [0, POLICY_MAX]: a negative delay becomes 0 (the retry is due at once),
    one past a year becomes a year."""
    return min(max(delay, timedelta(0)), POLICY_MAX)
