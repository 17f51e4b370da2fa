"""Ten workers fire one schedule while some are SIGKILLed: one job per fire time."""

from __future__ import annotations

import pytest

from .scenarios import Env, schedule_chaos


@pytest.mark.timeout(300)
async def test_ten_workers_enqueue_each_fire_time_once_while_workers_are_killed(fault_env: Env) -> None:
    fig = await schedule_chaos(fault_env, workers=10, seconds=20)
    print(fig.summary())
    fig.assert_clean()
    extra = fig.extra
    assert extra["fire times"] >= 15
    assert extra["fire times without exactly one job"] == 0
    assert extra["jobs without a fire time"] == 0
    assert extra["jobs of the schedule"] == extra["fire times"]
    assert extra["missed fire times"] == 0
    assert extra["enqueued before their fire time"] == 0
    assert extra["ERROR lines"] == 0
    assert extra["kills"] >= 5
    assert set(extra["graceful exits"].split("/")) == {"0"}
