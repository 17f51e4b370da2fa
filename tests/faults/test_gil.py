"""Tasks holding the GIL for several times lost_after beside ordinary jobs: no worker is
declared lost, no job rescued (issue 12, point 2; the heartbeat process)."""

from __future__ import annotations

import pytest

from akadze.worker.heartbeat import process_possible

from .gil import gil_holders
from .scenarios import Env


@pytest.mark.timeout(300)
@pytest.mark.skipif(not process_possible(), reason="the heartbeat process needs /proc (Linux)")
async def test_gil_holders_do_not_get_their_workers_declared_lost(fault_env: Env) -> None:
    fig = await gil_holders(fault_env, holders=2, normal=100)
    print(fig.extra)
    fig.assert_clean()
