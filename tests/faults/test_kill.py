"""Random SIGKILL of one of four worker processes under load."""

from __future__ import annotations

import pytest

from .scenarios import Env, kill_chaos


@pytest.mark.timeout(300)
async def test_random_sigkill_under_load_loses_nothing_and_runs_nothing_twice_unjustified(
    fault_env: Env,
) -> None:
    fig = await kill_chaos(fault_env, jobs=600, seconds=20)
    print(fig.summary())
    fig.assert_clean()
    assert fig.extra["kills"] >= 5
    assert fig.lost == 0 and fig.stuck == 0
    assert set(fig.extra["graceful exits"].split("/")) == {"0"}
    # every rescue happens within the horizon: lost_after + rescue interval + slack
    assert fig.rescue_max_s is None or fig.rescue_max_s <= 3.0 + 1.5 + 3.0
