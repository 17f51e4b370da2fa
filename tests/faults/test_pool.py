"""A pool smaller than the slots: no deadlock, no pool timeout; a pool too small to ever serve
a run is refused when the worker is made."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from akadze import Akadze
from akadze.app import normalize_url
from akadze.worker import Worker

from .scenarios import Env, small_pool


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("pool_size", "max_overflow", "slots"),
    [(1, None, 32), (4, 0, 16)],
    ids=["own-engine-1+10-for-32-slots", "borrowed-engine-4-for-16-slots"],
)
async def test_a_pool_smaller_than_the_slots_does_not_deadlock(
    fault_env: Env, pool_size: int, max_overflow: int | None, slots: int
) -> None:
    fig = await small_pool(fault_env, jobs=300, slots=slots, pool_size=pool_size, max_overflow=max_overflow)
    print(fig.summary())
    fig.assert_clean()
    assert fig.succeeded == 300
    assert fig.reruns == 0 and fig.runs == 300, "a pool timeout would show as an error and a re-run"
    assert fig.extra["peak running"] > fig.extra["pool connections"]


async def test_a_pool_no_larger_than_what_the_worker_keeps_is_refused(fault_env: Env, caplog) -> None:
    async def noop() -> None:
        return None

    for size, listen in ((2, False), (3, True)):
        engine = create_async_engine(normalize_url(fault_env.url), pool_size=size, max_overflow=0)
        app = Akadze(engine=engine)
        app.register(noop, name="noop")
        with pytest.raises(ValueError, match=f"pool allows {size} connections"):
            Worker(app, slots=4, listen=listen)
        await engine.dispose()
    engine = create_async_engine(normalize_url(fault_env.url), pool_size=4, max_overflow=0)
    app = Akadze(engine=engine)
    app.register(noop, name="noop")
    with caplog.at_level(logging.WARNING, logger="akadze.worker"):
        Worker(app, slots=8)
    assert "runs may wait for a connection" in caplog.text
    await engine.dispose()
