"""Hostile task names, queue names, schedule names and argument values: each is stored and used
verbatim or refused with a clear error at registration or enqueue; none is ever run as SQL."""

from __future__ import annotations

import pytest

from .scenarios import HOSTILE_NAMES, REFUSED_NAMES, Env, hostile_input


@pytest.mark.timeout(180)
async def test_hostile_names_and_values_are_stored_verbatim_or_refused_clearly(fault_env: Env) -> None:
    fig = await hostile_input(fault_env)
    print(fig.extra)
    fig.assert_clean()
    extra = fig.extra
    assert extra["names accepted"] == 2 * len(HOSTILE_NAMES)
    assert extra["names refused"] == 2 * len(REFUSED_NAMES)
    assert extra["refusals without a clear reason"] == []
    assert extra["hostile names refused"] == []
    total = extra["names accepted"]
    assert extra["jobs stored, run and answered verbatim"] == f"{total}/{total}"
    assert extra["63-byte twins served apart"]
    assert extra["schedule names stored verbatim"]
    assert extra["schedule names refused"] == f"{len(REFUSED_NAMES)}/{len(REFUSED_NAMES)}"
    assert extra["unclear refusals"] == []
    assert extra["rows inserted by refused enqueues"] == 0
    assert extra["400k-character value stored verbatim"]
    assert extra["schema unchanged"] and extra["sentinel rows"] == 10
