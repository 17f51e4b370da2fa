"""Zombie runs: a SIGSTOPped worker resumed after its jobs were rescued; completions racing rescues."""

from __future__ import annotations

import pytest

from .scenarios import Env, completion_race, sigstop_fencing


@pytest.mark.timeout(180)
async def test_a_resumed_zombie_is_fenced_off_and_keeps_serving(fault_env: Env) -> None:
    fig = await sigstop_fencing(fault_env)
    print(fig.summary())
    fig.assert_clean()
    assert fig.extra["zombie completions rejected"] == 2
    assert fig.reruns_rescue == 2
    assert fig.extra["A alive"] and fig.extra["A re-registered"]
    assert fig.extra["jobs A ran after resuming"] > 0


@pytest.mark.timeout(180)
async def test_a_thousand_completions_racing_rescues_have_exactly_one_winner_each(fault_env: Env) -> None:
    fig = await completion_race(fault_env.url, fault_env.dsn, iterations=1000)
    print(fig.summary())
    fig.assert_clean()
    assert fig.extra["both"] == 0 and fig.extra["neither"] == 0 and fig.extra["other errors"] == 0
    assert fig.extra["completed"] + fig.extra["rescued"] == 1000
    # the race is real: both sides win sometimes
    assert fig.extra["completed"] > 0 and fig.extra["rescued"] > 0
