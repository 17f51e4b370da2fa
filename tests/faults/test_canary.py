"""Task arguments and results never appear in any log line, even at DEBUG (canary values)."""

from __future__ import annotations

import pytest

from .scenarios import Env, canary_logs


@pytest.mark.timeout(180)
@pytest.mark.parametrize("log_format", ["text", "json"])
async def test_no_argument_or_result_reaches_a_log_line_at_debug(fault_env: Env, log_format: str) -> None:
    fig = await canary_logs(fault_env, log_format=log_format)
    print({k: v for k, v in fig.extra.items() if k != "first hits"})
    fig.assert_clean()
    assert fig.extra["canary hits in logs"] == 0, fig.extra["first hits"]
    assert fig.extra["paths not logged"] == [], (
        "the scenario must walk the rescue, fencing and shutdown paths"
    )
    # a user's own exception message may quote a secret: it is stored on the job and logged with
    # its failed run (documented); nothing else reaches the stored errors
    assert fig.extra["stored errors with a canary"] == ["canary-raise_canary"]
    assert fig.extra["released at shutdown"]
    # a failed run logs its error's message: the task's own words, quoting the canary here
    assert fig.extra["own message logged"]
    if log_format == "json":
        assert fig.extra["worker lines not JSON"] == []
    assert fig.reruns_rescue >= 1
