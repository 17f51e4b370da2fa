"""Worker "hosts" in network namespaces of the test's own (netns.py): a SIGKILLed host's jobs
are rescued by the others, and a schedule fires each time once across the hosts.

It needs root (``ip netns add``); elsewhere it skips, with the reason. With
AKADZE_REQUIRE_NETNS set (.ci/run, which runs as root) a skip is a failure instead.
"""

from __future__ import annotations

import os

import pytest

from . import netns
from .scenarios import Env


@pytest.fixture
def namespaces_allowed() -> None:
    reason = netns.unavailable()
    if reason is None:
        return
    if os.environ.get("AKADZE_REQUIRE_NETNS"):
        pytest.fail(f"AKADZE_REQUIRE_NETNS is set, and network namespaces cannot be made: {reason}")
    pytest.skip(f"network namespaces cannot be made here: {reason}")


@pytest.mark.timeout(240)
async def test_worker_hosts_in_network_namespaces_rescue_each_other_and_fire_each_schedule_once(
    namespaces_allowed: None, fault_env: Env
) -> None:
    fig = await netns.hosts_chaos(fault_env)
    print(fig.summary())
    fig.assert_clean()
    extra = fig.extra
    # the hosts are apart: PostgreSQL's loopback is not theirs, each has its own name, and
    # every connection came from a namespace's own address
    assert extra["PostgreSQL's loopback reachable from a namespace"] is False
    assert extra["hosts registered"] == ["akz-host1", "akz-host2", "akz-host3"]
    assert extra["pids registered are the ones signalled"]
    assert set(extra["forwarded from"]) == set(extra["namespace addresses"])
    # rescue across hosts
    assert extra["kills"] == 1
    assert extra["jobs running on the killed host"] >= 1
    assert extra["killed host's jobs ended on another host"] == extra["jobs running on the killed host"]
    assert fig.reruns_rescue >= extra["jobs running on the killed host"]
    assert extra["work jobs not succeeded"] == 0
    assert fig.lost == 0 and fig.stuck == 0
    # the schedule: each fire time once, none missed, across the kill
    assert extra["fire times"] >= 10
    assert extra["fire times without exactly one job"] == 0
    assert extra["jobs without a fire time"] == 0
    assert extra["missed fire times"] == 0
    assert extra["enqueued before their fire time"] == 0
    assert extra["ERROR lines"] == 0
    assert set(extra["graceful exits"].split("/")) == {"0"}
