"""Rows no worker can run, written with SQL next to ordinary jobs and a SIGKILLed worker's:
each ends failed with its own clear error, and nothing else stops (issue 12, point 1)."""

from __future__ import annotations

import pytest

from .hostile_rows import HOSTILE, ORPHANS, hostile_rows
from .scenarios import Env


@pytest.mark.timeout(240)
async def test_hostile_rows_fail_alone_and_the_rest_flows(fault_env: Env) -> None:
    fig = await hostile_rows(fault_env, normal=200)
    print(fig.extra)
    fig.assert_clean()
    assert set(fig.details["hostile"]) == {*HOSTILE, *ORPHANS}
    assert fig.extra["normal succeeded"] == "200/200"
    assert fig.extra["rescue passes failed"] == 0
