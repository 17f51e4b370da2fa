"""Limits, unique jobs and a pause under SIGKILL chaos (issue 32, point 5), at CI sizes: each
scenario runs 10-20 s of faults; the long runs are ``python -m tests.faults.chaos --scenario
flow-keyed`` (and flow-rate, flow-unique, flow-pause), their figures in docs/reliability.md."""

from __future__ import annotations

import pytest

from .flow_chaos import keyed_limit_chaos, pause_chaos, rate_limit_chaos, unique_chaos
from .scenarios import Env


@pytest.mark.timeout(240)
async def test_a_keyed_concurrency_limit_holds_for_every_key_under_sigkill_chaos(fault_env: Env) -> None:
    fig = await keyed_limit_chaos(fault_env, seconds=12, accounts=4, per_account=12)
    print(fig.extra)
    fig.assert_clean()


@pytest.mark.timeout(180)
async def test_a_rate_limit_has_no_window_above_its_rate_after_a_kill(fault_env: Env) -> None:
    fig = await rate_limit_chaos(fault_env, jobs=30, kills=2)
    print(fig.extra)
    fig.assert_clean()


@pytest.mark.timeout(180)
async def test_concurrent_producers_of_unique_jobs_make_one_job_per_key_under_sigkill(fault_env: Env) -> None:
    fig = await unique_chaos(fault_env, seconds=10, producers=6)
    print(fig.extra)
    fig.assert_clean()


@pytest.mark.timeout(180)
async def test_a_paused_queue_is_not_claimed_from_after_the_poll_interval(fault_env: Env) -> None:
    fig = await pause_chaos(fault_env, jobs=300)
    print(fig.extra)
    fig.assert_clean()
