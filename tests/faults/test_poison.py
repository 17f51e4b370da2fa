"""Poison jobs end failed with a clear error after their budget; the workers keep serving."""

from __future__ import annotations

import pytest

from .scenarios import Env, poison


@pytest.mark.timeout(240)
async def test_poison_jobs_end_failed_with_a_clear_error_and_the_rest_flows(fault_env: Env) -> None:
    fig = await poison(fault_env, normal=200)
    print(fig.extra)
    # the scenario's criteria: every poison job failed within its budget with its own clear
    # error and no argument value, os._exit ends only its process, SystemExit not even that,
    # and every normal job succeeded
    fig.assert_clean()
    assert len(fig.details["poison"]) == 7
    assert fig.extra["normal succeeded"] == "200/200"
