"""Retry delays: the default curve, per-task policies, clamping and the fallbacks. Pure."""

from __future__ import annotations

import logging
import random
from datetime import timedelta

import pytest
from hypothesis import given, strategies as st

from akadze.backoff import POLICY_MAX, clamp_policy_delay, default_backoff, policy_delay
from akadze.outcomes import RunEnd, decide

attempts = st.integers(min_value=1, max_value=10_000)
seeds = st.integers(min_value=0, max_value=2**32)


def cap_curve(attempt: int) -> float:
    """The spec's curve before jitter: 2^(attempt-1) seconds, at most 300."""
    return min(2.0 ** (attempt - 1), 300.0) if attempt < 64 else 300.0


class TestDefaultBackoff:
    @given(attempt=attempts, seed=seeds)
    def test_stays_within_half_and_all_of_the_capped_curve(self, attempt: int, seed: int) -> None:
        delay = default_backoff(attempt, random.Random(seed)).total_seconds()
        assert 0.5 * cap_curve(attempt) - 1e-6 <= delay <= cap_curve(attempt) + 1e-6

    @pytest.mark.parametrize(
        ("attempt", "low", "high"),
        [(1, 0.5, 1), (2, 1, 2), (3, 2, 4), (9, 128, 256), (10, 150, 300), (50, 150, 300)],
        ids=lambda value: str(value),
    )
    def test_follows_the_documented_steps(self, attempt: int, low: float, high: float) -> None:
        delays = [default_backoff(attempt, random.Random(seed)).total_seconds() for seed in range(200)]
        assert low <= min(delays)
        assert max(delays) <= high

    def test_jitter_spreads_a_batch_that_failed_together(self) -> None:
        rng = random.Random(7)
        delays = {round(default_backoff(5, rng).total_seconds(), 3) for _ in range(100)}
        assert len(delays) > 50

    def test_reaches_both_ends_of_the_jitter_range(self) -> None:
        class Fixed(random.Random):
            def __init__(self, value: float) -> None:
                super().__init__()
                self.value = value

            def random(self) -> float:
                return self.value

        assert default_backoff(4, Fixed(0.0)) == timedelta(seconds=4)
        assert default_backoff(4, Fixed(0.999999)).total_seconds() == pytest.approx(8, rel=1e-5)


class TestPolicy:
    @given(attempt=attempts, seconds=st.floats(min_value=-1e12, max_value=1e12, allow_nan=False))
    def test_a_policy_delay_is_clamped_to_zero_and_365_days(self, attempt: int, seconds: float) -> None:
        wanted = timedelta(seconds=seconds)
        delay = policy_delay(lambda _attempt: wanted, attempt)
        assert timedelta(0) <= delay <= timedelta(days=365)
        if timedelta(0) <= wanted <= POLICY_MAX:
            assert delay == wanted

    @given(days=st.integers(min_value=-999_999_999, max_value=999_999_999))
    def test_clamping_holds_over_the_whole_timedelta_range(self, days: int) -> None:
        delay = clamp_policy_delay(timedelta(days=days))
        assert timedelta(0) <= delay <= timedelta(days=365)

    def test_the_policy_is_given_the_attempt_that_was_spent(self) -> None:
        seen: list[int] = []

        def policy(attempt: int) -> timedelta:
            seen.append(attempt)
            return timedelta(minutes=attempt)

        assert policy_delay(policy, 3) == timedelta(minutes=3)
        assert seen == [3]

    @pytest.mark.parametrize(
        "policy",
        [
            pytest.param(lambda attempt: 1 / 0, id="raises"),
            pytest.param(lambda attempt: 5, id="returns-an-int"),
            pytest.param(lambda attempt: None, id="returns-none"),
            pytest.param(lambda attempt: "5 minutes", id="returns-a-string"),
        ],
    )
    @given(attempt=st.integers(min_value=1, max_value=40), seed=seeds)
    def test_a_broken_policy_falls_back_to_the_default_curve(
        self, policy: object, attempt: int, seed: int
    ) -> None:
        fallback = policy_delay(policy, attempt, random.Random(seed))  # type: ignore[arg-type]
        assert fallback == default_backoff(attempt, random.Random(seed))

    def test_a_broken_policy_says_so_in_the_log_without_the_values(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.DEBUG)

        def policy(attempt: int) -> timedelta:
            raise RuntimeError("secret-in-policy")

        policy_delay(policy, 1)
        assert any(r.name == "akadze.backoff" and r.levelno == logging.WARNING for r in caplog.records)
        assert "secret-in-policy" not in caplog.text

    def test_no_policy_means_the_default_curve(self) -> None:
        assert policy_delay(None, 6, random.Random(1)) == default_backoff(6, random.Random(1))


class TestDecideUsesTheCurve:
    @given(attempt=st.integers(min_value=1, max_value=30), seed=seeds)
    def test_a_rescued_job_gets_the_default_curve_even_with_a_task_policy(
        self, attempt: int, seed: int
    ) -> None:
        completion = decide(
            RunEnd.WORKER_LOST,
            attempt=attempt,
            max_attempts=attempt + 1,
            policy=lambda _attempt: timedelta(days=3),
            rng=random.Random(seed),
        )
        assert completion.delay_s == default_backoff(attempt, random.Random(seed)).total_seconds()

    @given(attempt=st.integers(min_value=1, max_value=30))
    def test_an_error_uses_the_task_policy(self, attempt: int) -> None:
        completion = decide(
            RunEnd.RAISED,
            attempt=attempt,
            max_attempts=attempt + 1,
            error=ValueError("boom"),
            policy=lambda spent: timedelta(minutes=spent),
        )
        assert completion.delay_s == timedelta(minutes=attempt).total_seconds()

    @given(seconds=st.floats(min_value=0, max_value=1e9, allow_nan=False))
    def test_retry_delay_wins_over_the_policy_and_is_not_clamped(self, seconds: float) -> None:
        from akadze import Retry

        delay = timedelta(days=400) + timedelta(seconds=seconds)
        completion = decide(
            RunEnd.RAISED,
            attempt=1,
            max_attempts=3,
            error=Retry(delay),
            policy=lambda _attempt: timedelta(seconds=1),
        )
        assert completion.delay_s == delay.total_seconds()
