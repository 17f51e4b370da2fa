"""Workflows under SIGKILL chaos (issue 29), at CI size: two fan-ins of 1,000 parents (one with a
parent that fails and is requeued) and 24 five-level diamonds, 3 worker processes SIGKILLed
every 2-4 s for 20 s, random steps failed, requeued and cancelled, whole workflows cancelled.
The long run is ``python -m tests.faults.chaos --scenario workflows``; its figures are in
docs/reliability.md."""

from __future__ import annotations

import pytest

from .scenarios import Env
from .workflow_chaos import workflow_chaos


@pytest.mark.timeout(420)
async def test_workflows_end_where_their_rules_say_under_sigkill_chaos(fault_env: Env) -> None:
    fig = await workflow_chaos(fault_env, fan_ins=(1000, 1000), diamonds=24, seconds=20)
    print(fig.summary())
    for note in fig.details.get("workflow notes", []):
        print(note)
    fig.assert_clean()
    assert fig.extra["kills"] >= 3
    assert fig.lost == 0 and fig.stuck == 0 and fig.duplicate_effects == 0
    fans = fig.extra["fan-ins"]
    assert [f["parents"] for f in fans] == [1000, 1000]
    assert all(f["releases"] == 1 and f["runs ended well"] == 1 for f in fans), fans
