"""A retry herd (issue 12, point 4): by default fresh work of the same queue waits behind due
retries (the claim is FIFO by run_at within a priority); with the task's retry_priority below
its priority, it does not."""

from __future__ import annotations

import pytest

from .herd import retry_herd
from .scenarios import Env


@pytest.mark.timeout(300)
async def test_fresh_work_waits_behind_a_herd_of_due_retries_by_default(fault_env: Env) -> None:
    fig = await retry_herd(fault_env, task="fault.flaky", jobs=1000)
    print(fig.extra)
    fig.assert_clean()
    # the documented default: FIFO by due time, so probes wait for the herd ahead of them
    assert fig.extra["probe wait during the herd max s"] > 0.5


@pytest.mark.timeout(300)
async def test_with_retry_priority_fresh_work_goes_before_the_herd(fault_env: Env) -> None:
    fig = await retry_herd(fault_env, task="fault.flaky.yielding", jobs=1000)
    print(fig.extra)
    fig.assert_clean()
    # a probe waits for a free slot and a claim (a poll of 0.5 s at most), not for the herd
    assert fig.extra["probe wait during the herd max s"] < 1.0
