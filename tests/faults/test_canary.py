"""Task arguments and results never appear in any log line, even at DEBUG (canary values)."""

from __future__ import annotations

import pytest

from .scenarios import Env, canary_logs


@pytest.mark.timeout(180)
async def test_no_argument_or_result_reaches_a_log_line_at_debug(fault_env: Env) -> None:
    fig = await canary_logs(fault_env)
    print({k: v for k, v in fig.extra.items() if k != "first hits"})
    fig.assert_clean()
    assert fig.extra["canary hits in logs"] == 0, fig.extra["first hits"]
    assert fig.extra["paths not logged"] == [], (
        "the scenario must walk the rescue, fencing and shutdown paths"
    )
    # a user's own exception message may quote a secret: it is stored on the job (documented),
    # never logged; nothing else reaches the stored errors
    assert fig.extra["stored errors with a canary"] == ["canary-raise_canary"]
    assert fig.extra["released at shutdown"]
    assert fig.reruns_rescue >= 1
